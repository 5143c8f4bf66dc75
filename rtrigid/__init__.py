"""rtrigid: fixed-step rigid-body dynamics for real-time loops."""
