"""What the pipeline keeps beside Spark's checkpoint: every side file, who owns it and its format."""
