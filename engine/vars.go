package engine

// $vars holds the outputs of notification nodes (node.Vars) by variable
// name: one top-level context key whose object grows along a path.

// withVar sets $vars.<name> in ctx (which is the caller's own copy):
// $vars is a new object each time, since contexts are shared by messages.
func withVar(ctx map[string]any, name string, v any) map[string]any {
	old, _ := ctx["$vars"].(map[string]any)
	vars := make(map[string]any, len(old)+1)
	for k, x := range old {
		vars[k] = x
	}
	vars[name] = v
	ctx["$vars"] = vars
	return ctx
}

// unionKey adds key's value from a parent's context to a merge's union. The
// union's keys come from later parents; $vars is merged variable by
// variable, so a merge of an email branch and an sms branch sees both.
func unionKey(union map[string]any, key string, v any) {
	old, isMap := union[key].(map[string]any)
	add, addMap := v.(map[string]any)
	if key != "$vars" || !isMap || !addMap {
		union[key] = v
		return
	}
	vars := make(map[string]any, len(old)+len(add))
	for k, x := range old {
		vars[k] = x
	}
	for k, x := range add {
		vars[k] = x
	}
	union[key] = vars
}
