"""Assets and events: registering a finished task's outlet events, manual events, pruning."""
