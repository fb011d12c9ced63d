package cli

func (c *command) doctor(args []string) int { return 0 }
