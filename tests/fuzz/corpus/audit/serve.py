import os
x = os.environ.get("K", "32")
y = float(os.getenv("F", 0.9))
os.environ["S"] = "slow"
os.environ.setdefault("MAX_MODEL_LEN", 8192)
