"""State tasks leave behind: XComs and the task and asset state stores."""
