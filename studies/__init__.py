"""Research probes run by hand against rtrigid (see README.md here); not installed with rtrigid."""
