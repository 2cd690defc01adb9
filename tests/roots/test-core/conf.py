extensions = ["livecells"]
livecells_timeout = 120
