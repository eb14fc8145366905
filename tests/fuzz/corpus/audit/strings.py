os.environ.get("K", """multi
line""")
os.environ.get("E", "\x00\n")
os.environ[