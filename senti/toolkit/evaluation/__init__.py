"""The evaluation wing: classification figures (metrics), the char n-gram baseline beside them (baseline), and
scoring a model on a split or several domains (evaluate). Imports the data wing."""
