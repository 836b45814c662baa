package redact

import (
	"encoding/json"
	"net/url"
)

// Public are the credential fields that describe where and as whom a
// credential is used, not how it proves it: the type, the server (host,
// port, tls, auth mechanism, URLs), the sender (from) and the account
// (username, account_sid), and allowed_hosts. They are what users read in
// outputs and errors ("SMTP smtp.example.com:587", "provider": "twilio", a
// Bcc to the from address), so AddCredential does not redact them. Every
// other field (token, password, auth_token, header:<Name>, headers, keys,
// a webhook's body template, any field not listed) is a secret.
var Public = map[string]bool{
	"type": true, "host": true, "port": true, "tls": true, "auth": true,
	"from": true, "username": true, "account_sid": true,
	"url": true, "base_url": true, "allowed_hosts": true,
}

// AddCredential records the secret fields of a credential (every field but
// the Public ones) with their encoded forms. A public field can still carry
// a secret, which is added: the password of a URL's user info and its query
// values (a webhook URL with ?token=…), and the values of a "headers"
// object. HTTP Basic's base64 of "a:b" is added for every pair of fields of
// which one is secret, so "account_sid:auth_token" and "username:password"
// stay hidden although the sid and the user name show.
func (s *Set) AddCredential(fields map[string]string) {
	var secret, public []string
	for k, v := range fields {
		if !Public[k] {
			secret = append(secret, v)
			secret = append(secret, headerValues(k, v)...)
			continue
		}
		public = append(public, v)
		if k == "url" || k == "base_url" {
			secret = append(secret, urlSecrets(v)...)
		}
	}
	s.add(secret, public)
}

// headerValues are the values of a "headers" field holding a JSON object
// of header name → value (the webhook SMS credential's).
func headerValues(k, v string) []string {
	if k != "headers" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(v), &m) != nil {
		return nil
	}
	out := make([]string, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	return out
}

// urlSecrets are the parts of a URL that may carry a secret: the user
// info's password and the query's values.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
}
