"""The surge wing: choosing texts to label (selection), the labelling job and its log (labeling) and its web page
(label_server). Imports the data and evaluation wings."""
