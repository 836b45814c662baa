package workflow

import (
	"encoding/json"
	"slices"
)

// MaxCredentialRefs is the longest failover list one node may name
// (`"credentials": {"ref": ["primary", "backup", …]}`).
const MaxCredentialRefs = 4

// Refs is the node's credentials in the order they are tried: Ref, then
// the failover credentials (docs/notifications.md, "Provider failover").
func (c *CredentialRef) Refs() []string {
	if c == nil {
		return nil
	}
	return append([]string{c.Ref}, c.Failover...)
}

// MarshalJSON writes "ref" as a string, or as a list when the node names
// failover credentials.
func (c CredentialRef) MarshalJSON() ([]byte, error) {
	if len(c.Failover) == 0 {
		return json.Marshal(struct {
			Ref string `json:"ref"`
		}{c.Ref})
	}
	return json.Marshal(struct {
		Ref []string `json:"ref"`
	}{c.Refs()})
}

// UnmarshalJSON reads "ref" as a string or a list of strings.
func (c *CredentialRef) UnmarshalJSON(b []byte) error {
	var v struct {
		Ref json.RawMessage `json:"ref"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = CredentialRef{}
	if isNull(v.Ref) || len(v.Ref) == 0 {
		return nil
	}
	if v.Ref[0] == '[' {
		var list []string
		if err := json.Unmarshal(v.Ref, &list); err != nil {
			return err
		}
		if len(list) > 0 {
			c.Ref, c.Failover = list[0], list[1:]
		}
		return nil
	}
	return json.Unmarshal(v.Ref, &c.Ref)
}

// credentialRef decodes "ref": a credential's name, or a list of them
// tried in order.
func (d *decoder) credentialRef(f map[string]json.RawMessage, path string, c *CredentialRef) {
	raw, ok := f["ref"]
	if !ok || isNull(raw) {
		return
	}
	if len(raw) > 0 && raw[0] == '[' {
		var list []string
		if !d.field(f, path, "ref", &list) {
			return
		}
		if len(list) == 0 {
			d.report(join(path, "ref"), "an empty list: name one credential, or several to fail over between")
			return
		}
		c.Ref, c.Failover = list[0], list[1:]
		return
	}
	d.field(f, path, "ref", &c.Ref)
}

// checkCredentialRefs reports a failover list that is too long, names a
// credential twice or holds an empty name.
func (v *validator) checkCredentialRefs(p string, c *CredentialRef) {
	if c == nil || len(c.Failover) == 0 {
		return
	}
	refs := c.Refs()
	if len(refs) > MaxCredentialRefs {
		v.report(p+".credentials.ref", "%d credentials, over the limit of %d", len(refs), MaxCredentialRefs)
	}
	for i, r := range refs {
		switch {
		case r == "":
			v.report(p+".credentials.ref", "entry %d is empty", i)
		case slices.Index(refs, r) != i:
			v.report(p+".credentials.ref", "credential %q is named twice", truncate(r))
		}
	}
}
