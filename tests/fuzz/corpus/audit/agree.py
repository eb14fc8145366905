x = os.environ.get('K', '64')
if os.environ["S"] == "slow":
    pass
z = os.getenv( "B" ,True)
