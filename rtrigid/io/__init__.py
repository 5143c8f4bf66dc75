"""Input and output in real time: the paced runner (:mod:`.realtime`) and the lock-step
hardware-in-the-loop server and client (:mod:`.hil`)."""
