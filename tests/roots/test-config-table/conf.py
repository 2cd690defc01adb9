# The docs' generated table of config values, built alone (the test puts docs/_ext on the path).
extensions = ["livecells_config_table"]
