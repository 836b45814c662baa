package expr

import "fmt"

// ParserPanicError is a panic inside a third-party parser or renderer
// (expr-lang, Liquid), turned into an error: bad input must fail the one
// definition or node it belongs to, never the process.
type ParserPanicError struct {
	// What says which call panicked ("liquid parse", "expression compile", ...).
	What  string
	Panic any
}

func (e *ParserPanicError) Error() string {
	return fmt.Sprintf("%s failed on this input (internal panic: %v)", e.What, e.Panic)
}

// recoverInto turns a panic of the surrounding function into *err. Use it
// as `defer recoverInto("liquid parse", &err)` around every call into a
// parser this package does not own.
func recoverInto(what string, err *error) {
	if p := recover(); p != nil {
		*err = &ParserPanicError{What: what, Panic: p}
	}
}
