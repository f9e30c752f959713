package app

// StartCanary runs the canary function (functions/canary).
func StartCanary() {
	panic("canary: not wired yet") // replaced in this session (issue 42)
}
