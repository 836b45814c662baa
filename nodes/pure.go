package nodes

// The runners that do no I/O: the engine runs them without a deadline of
// their own (node.Pure); their expressions are bounded by expr.Limits.
func (*conditionalRunner) Pure() {}
func (*logRunner) Pure()         {}
func (*setRunner) Pure()         {}
func (*switchRunner) Pure()      {}
