"""The write path: writer, supersession, locks, repair, observations and witnessed events."""
