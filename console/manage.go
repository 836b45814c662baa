package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/store"
)

// Issue 38: the pages that manage what starts work (hooks, schedules) and
// who may (credentials, tokens), and the list's bulk actions. Every read
// and write goes through the API in-process as the session's token, so
// the API's roles, scopes, validation and audit apply unchanged; the pages
// only hide the controls the role lacks.

func (c *Console) manageRoutes() {
	c.mux.HandleFunc("GET /hooks", c.session(c.hooksPage))
	c.mux.HandleFunc("POST /hooks", c.session(c.hooksAction))
	c.mux.HandleFunc("GET /schedules", c.session(c.schedulesPage))
	c.mux.HandleFunc("POST /schedules", c.session(c.schedulesAction))
	c.mux.HandleFunc("GET /ui/cron", c.session(c.cronPreview))
	c.mux.HandleFunc("GET /credentials", c.session(c.credentialsPage))
	c.mux.HandleFunc("POST /credentials", c.session(c.credentialsAction))
	c.mux.HandleFunc("GET /tokens", c.session(c.tokensPage))
	c.mux.HandleFunc("POST /tokens", c.session(c.tokensAction))
	c.mux.HandleFunc("POST /executions/bulk", c.session(c.bulkAction))
}

// recorder keeps an in-process API answer.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

// apiAnswer is an API call's outcome: its status, body, and the problem's
// detail when it failed.
type apiAnswer struct {
	Status int
	Body   []byte
	Err    string
}

// call runs an API request in-process as the session's token (r's
// context carries the session, as the proxy's requests do).
func (c *Console) call(r *http.Request, method, path string, body any) apiAnswer {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apiAnswer{Status: http.StatusBadRequest, Err: err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return apiAnswer{Status: http.StatusBadRequest, Err: err.Error()}
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", r.UserAgent())
	rec := &recorder{h: http.Header{}}
	c.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	a := apiAnswer{Status: rec.status, Body: rec.body.Bytes()}
	if a.Status >= 400 {
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(a.Body, &p)
		a.Err = cmpOr(p.Detail, http.StatusText(a.Status))
	}
	return a
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// items decodes an API list's items into out; an error answer is returned.
func (a apiAnswer) items(out any) error {
	if a.Err != "" {
		return fmt.Errorf("%s", a.Err)
	}
	var page struct {
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(a.Body, &page); err != nil {
		return err
	}
	return json.Unmarshal(page.Items, out)
}

// done redirects to page with a notice of what an action did.
func done(w http.ResponseWriter, r *http.Request, page, notice string) {
	http.Redirect(w, r, page+"?done="+url.QueryEscape(notice), http.StatusSeeOther)
}

// workflowIDs lists the workflows the session sees (the newest 500), for
// the pages' workflow choices.
func (c *Console) workflowIDs(ctx context.Context, acc Access) ([]string, error) {
	var ids []string
	cursor := ""
	for range 5 {
		page, err := c.cfg.Store.ListWorkflows(ctx, 100, cursor)
		if err != nil {
			return nil, err
		}
		for _, wf := range page.Items {
			if acc.sees(wf.ID) {
				ids = append(ids, wf.ID)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Hooks.

type hookItem struct {
	ID         string    `json:"id"`
	WorkflowID string    `json:"workflow_id"`
	Name       string    `json:"name"`
	Disabled   bool      `json:"disabled"`
	Signed     bool      `json:"signed"`
	CreatedAt  time.Time `json:"created_at"`
	// Deliveries are the hook's newest deliveries, accepted or refused,
	// and their answers (issue 38, GET …/hooks/{hook}/deliveries).
	Deliveries []hookDelivery `json:"-"`
}

// hookDelivery is a delivery as the API lists it.
type hookDelivery struct {
	ReceivedAt  time.Time `json:"received_at"`
	Status      int       `json:"status"`
	Accepted    bool      `json:"accepted"`
	Code        string    `json:"code"`
	ExecutionID string    `json:"execution_id"`
	EventID     string    `json:"event_id"`
	Size        int64     `json:"size"`
}

// deliveriesShown is how many of a hook's last deliveries its row lists.
const deliveriesShown = 8

func (c *Console) hooksPage(w http.ResponseWriter, r *http.Request) {
	c.renderHooks(w, r, map[string]any{})
}

func (c *Console) renderHooks(w http.ResponseWriter, r *http.Request, data map[string]any) {
	acc := accessOf(r)
	ids, err := c.workflowIDs(r.Context(), acc)
	if err != nil {
		c.fail(w, r, "the workflows", err)
		return
	}
	var hooks []hookItem
	var errs []string
	for _, id := range ids {
		var hs []hookItem
		if err := c.call(r, "GET", "/v1/workflows/"+url.PathEscape(id)+"/hooks", nil).items(&hs); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for i := range hs {
			path := "/v1/workflows/" + url.PathEscape(id) + "/hooks/" + url.PathEscape(hs[i].ID) + "/deliveries?limit=" + strconv.Itoa(deliveriesShown)
			if err := c.call(r, "GET", path, nil).items(&hs[i].Deliveries); err != nil {
				errs = append(errs, err.Error())
			}
		}
		hooks = append(hooks, hs...)
	}
	data["Title"], data["Hooks"], data["Workflows"], data["Errors"] = "Hooks", hooks, ids, errs
	data["Done"] = r.URL.Query().Get("done")
	c.render(w, r, "hooks", data)
}

func (c *Console) hooksAction(w http.ResponseWriter, r *http.Request) {
	wf, hook, action := r.PostFormValue("workflow"), r.PostFormValue("hook"), r.PostFormValue("action")
	base := "/v1/workflows/" + url.PathEscape(wf) + "/hooks"
	one := base + "/" + url.PathEscape(hook)
	var a apiAnswer
	switch action {
	case "create":
		a = c.call(r, "POST", base, map[string]any{"name": strings.TrimSpace(r.PostFormValue("name"))})
	case "rotate":
		a = c.call(r, "POST", one+"/rotate", nil)
	case "disable", "enable":
		// PUT replaces a hook's settings: send back what it has, with the
		// flag changed.
		a = c.call(r, "GET", one, nil)
		if a.Err == "" {
			var in map[string]json.RawMessage
			if err := json.Unmarshal(a.Body, &in); err != nil {
				c.fail(w, r, "hook "+hook, err)
				return
			}
			for k := range in {
				if !slices.Contains([]string{"name", "signature", "headers", "delivery_header", "max_body", "rate_limit", "reply"}, k) {
					delete(in, k)
				}
			}
			in["disabled"] = json.RawMessage(fmt.Sprint(action == "disable"))
			a = c.call(r, "PUT", one, in)
		}
	case "delete":
		a = c.call(r, "DELETE", one, nil)
	default:
		http.Error(w, "action must be create, rotate, disable, enable or delete", http.StatusBadRequest)
		return
	}
	if a.Err != "" {
		w.WriteHeader(a.Status)
		c.renderHooks(w, r, map[string]any{"Error": action + " failed: " + a.Err})
		return
	}
	if action == "create" || action == "rotate" {
		// The URL's secret is shown this once.
		var v struct {
			Name, URL, Secret, SigningSecret string
		}
		var raw struct {
			Name          string `json:"name"`
			URL           string `json:"url"`
			Secret        string `json:"secret"`
			SigningSecret string `json:"signing_secret"`
		}
		_ = json.Unmarshal(a.Body, &raw)
		v.Name, v.URL, v.Secret, v.SigningSecret = raw.Name, raw.URL, raw.Secret, raw.SigningSecret
		c.renderHooks(w, r, map[string]any{"Shown": v, "Done": action + "d hook " + raw.Name})
		return
	}
	done(w, r, "/hooks", action+"d hook "+hook)
}

// Schedules.

type scheduleItem struct {
	ID            string      `json:"id"`
	WorkflowID    string      `json:"workflow_id"`
	Name          string      `json:"name"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone"`
	Policy        string      `json:"policy"`
	CatchUpMax    int         `json:"catch_up_max"`
	Paused        bool        `json:"paused"`
	NextAt        *time.Time  `json:"next_at"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	LastSlot      *time.Time  `json:"last_slot"`
}

// cronForm is the schedule form's values, kept when it is shown again.
type cronForm struct {
	Workflow, Name, Cron, Timezone, Policy, CatchUpMax, Input string
	Paused                                                    bool
}

func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := cronForm{Workflow: q.Get("workflow"), Cron: q.Get("cron"), Timezone: q.Get("timezone"), Policy: q.Get("policy")}
	c.renderSchedules(w, r, f, map[string]any{})
}

func (c *Console) renderSchedules(w http.ResponseWriter, r *http.Request, f cronForm, data map[string]any) {
	ids, err := c.workflowIDs(r.Context(), accessOf(r))
	if err != nil {
		c.fail(w, r, "the workflows", err)
		return
	}
	var scheds []scheduleItem
	var errs []string
	for _, id := range ids {
		var ss []scheduleItem
		if err := c.call(r, "GET", "/v1/workflows/"+url.PathEscape(id)+"/schedules", nil).items(&ss); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		scheds = append(scheds, ss...)
	}
	if f.Cron != "" {
		data["Preview"], data["PreviewError"] = c.preview(r, f.Cron, f.Timezone)
	}
	data["Title"], data["Schedules"], data["Workflows"], data["Errors"], data["F"] = "Schedules", scheds, ids, errs, f
	data["Done"] = r.URL.Query().Get("done")
	c.render(w, r, "schedules", data)
}

// preview asks the API for a cron's next fire times.
func (c *Console) preview(r *http.Request, cron, tz string) ([]time.Time, string) {
	a := c.call(r, "GET", "/v1/schedules/preview?"+url.Values{"cron": {cron}, "timezone": {tz}}.Encode(), nil)
	if a.Err != "" {
		return nil, a.Err
	}
	var p struct {
		Next []time.Time `json:"next_fire_times"`
	}
	if err := json.Unmarshal(a.Body, &p); err != nil {
		return nil, err.Error()
	}
	return p.Next, ""
}

// cronPreview is the schedule form's live preview: the next 5 fire times
// of the cron being typed, as a fragment.
func (c *Console) cronPreview(w http.ResponseWriter, r *http.Request) {
	next, msg := c.preview(r, r.URL.Query().Get("cron"), r.URL.Query().Get("timezone"))
	c.render(w, r, "cronpreview", map[string]any{"Preview": next, "PreviewError": msg})
}

func (c *Console) schedulesAction(w http.ResponseWriter, r *http.Request) {
	wf, sc, action := r.PostFormValue("workflow"), r.PostFormValue("schedule"), r.PostFormValue("action")
	base := "/v1/workflows/" + url.PathEscape(wf) + "/schedules"
	one := base + "/" + url.PathEscape(sc)
	f := cronForm{Workflow: wf, Name: r.PostFormValue("name"), Cron: r.PostFormValue("cron"), Timezone: r.PostFormValue("timezone"),
		Policy: r.PostFormValue("policy"), CatchUpMax: r.PostFormValue("catch_up_max"), Input: r.PostFormValue("input"), Paused: r.PostFormValue("paused") != ""}
	var a apiAnswer
	switch action {
	case "create":
		in := map[string]any{"name": strings.TrimSpace(f.Name), "cron": f.Cron, "timezone": f.Timezone, "policy": f.Policy, "paused": f.Paused}
		if f.CatchUpMax != "" {
			var n int
			if _, err := fmt.Sscan(f.CatchUpMax, &n); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				c.renderSchedules(w, r, f, map[string]any{"Error": "catch-up limit: not a number"})
				return
			}
			in["catch_up_max"] = n
		}
		if s := strings.TrimSpace(f.Input); s != "" {
			if !json.Valid([]byte(s)) {
				w.WriteHeader(http.StatusBadRequest)
				c.renderSchedules(w, r, f, map[string]any{"Error": "input: not JSON"})
				return
			}
			in["input"] = json.RawMessage(s)
		}
		a = c.call(r, "POST", base, in)
	case "pause", "resume":
		a = c.call(r, "POST", one+"/"+action, nil)
	case "delete":
		a = c.call(r, "DELETE", one, nil)
	default:
		http.Error(w, "action must be create, pause, resume or delete", http.StatusBadRequest)
		return
	}
	if a.Err != "" {
		w.WriteHeader(a.Status)
		c.renderSchedules(w, r, f, map[string]any{"Error": action + " failed: " + a.Err})
		return
	}
	past := map[string]string{"create": "created", "pause": "paused", "resume": "resumed", "delete": "deleted"}[action]
	done(w, r, "/schedules", past+" schedule "+cmpOr(f.Name, sc))
}

// Credentials: names, types and allowed hosts; values are write-only (the
// form's value is sent once and never rendered back, not even on error).

type credentialItem struct {
	Name         string    `json:"name"`
	Type         string    `json:"type"`
	AllowedHosts string    `json:"allowed_hosts"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func (c *Console) credentialsPage(w http.ResponseWriter, r *http.Request) {
	c.renderCredentials(w, r, map[string]any{})
}

func (c *Console) renderCredentials(w http.ResponseWriter, r *http.Request, data map[string]any) {
	data["Title"], data["Done"] = "Credentials", r.URL.Query().Get("done")
	if accessOf(r).Credentials {
		var cs []credentialItem
		if err := c.call(r, "GET", "/v1/credentials", nil).items(&cs); err != nil {
			data["ListError"] = err.Error()
		}
		data["Items"] = cs
	}
	c.render(w, r, "credentials", data)
}

func (c *Console) credentialsAction(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	var a apiAnswer
	switch action := r.PostFormValue("action"); action {
	case "put":
		field := cmpOr(strings.TrimSpace(r.PostFormValue("field")), "token")
		value := map[string]string{field: r.PostFormValue("value")}
		if h := strings.TrimSpace(r.PostFormValue("allowed_hosts")); h != "" {
			value["allowed_hosts"] = h
		}
		a = c.call(r, "POST", "/v1/credentials", map[string]any{"name": name, "type": strings.TrimSpace(r.PostFormValue("type")), "value": value})
	case "delete":
		a = c.call(r, "DELETE", "/v1/credentials/"+url.PathEscape(name), nil)
	default:
		http.Error(w, "action must be put or delete", http.StatusBadRequest)
		return
	}
	if a.Err != "" {
		w.WriteHeader(a.Status)
		c.renderCredentials(w, r, map[string]any{"Error": a.Err})
		return
	}
	done(w, r, "/credentials", "saved "+name)
}

// Tokens.

type tokenItem struct {
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Role      string     `json:"role"`
	Workflows []string   `json:"workflows"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// roles are the token roles (docs/api.md "Roles"), the create form's choices.
var roles = []string{store.RoleViewer, store.RoleOperator, store.RoleEditor, store.RoleAdmin}

func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request) {
	c.renderTokens(w, r, map[string]any{})
}

func (c *Console) renderTokens(w http.ResponseWriter, r *http.Request, data map[string]any) {
	data["Title"], data["Done"], data["Roles"] = "Tokens", r.URL.Query().Get("done"), roles
	if accessOf(r).Admin {
		var ts []tokenItem
		if err := c.call(r, "GET", "/v1/tokens", nil).items(&ts); err != nil {
			data["ListError"] = err.Error()
		}
		data["Items"] = ts
	}
	c.render(w, r, "tokens", data)
}

func (c *Console) tokensAction(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	var a apiAnswer
	action := r.PostFormValue("action")
	switch action {
	case "create":
		var scope []string
		for _, s := range strings.Split(r.PostFormValue("workflows"), ",") {
			if s = strings.TrimSpace(s); s != "" {
				scope = append(scope, s)
			}
		}
		a = c.call(r, "POST", "/v1/tokens", map[string]any{"name": name, "role": r.PostFormValue("role"),
			"workflows": scope, "expires_in": strings.TrimSpace(r.PostFormValue("expires_in"))})
	case "revoke":
		a = c.call(r, "DELETE", "/v1/tokens/"+url.PathEscape(name), nil)
	default:
		http.Error(w, "action must be create or revoke", http.StatusBadRequest)
		return
	}
	if a.Err != "" {
		w.WriteHeader(a.Status)
		c.renderTokens(w, r, map[string]any{"Error": a.Err})
		return
	}
	if action == "create" {
		// The token itself is shown this once.
		var t struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal(a.Body, &t)
		c.renderTokens(w, r, map[string]any{"NewToken": t.Token, "NewName": name})
		return
	}
	done(w, r, "/tokens", "revoked "+name)
}

// Bulk actions of the executions list.

// bulkMax bounds the executions one bulk action takes (the list's pages
// hold 50; select-all of several pages is not offered).
const bulkMax = 500

// bulkAction cancels or re-runs the selected executions, each through the
// API as the session's token. Without confirm=yes it asks first, listing
// them; each execution's answer is reported.
func (c *Console) bulkAction(w http.ResponseWriter, r *http.Request) {
	action, ids := r.PostFormValue("action"), r.PostForm["id"]
	if action != "cancel" && action != "rerun" {
		http.Error(w, "action must be cancel or rerun", http.StatusBadRequest)
		return
	}
	if len(ids) == 0 || len(ids) > bulkMax {
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, r, "error", map[string]any{"Title": "Bad request", "Message": fmt.Sprintf("select 1 to %d executions", bulkMax)})
		return
	}
	data := map[string]any{"Title": "Confirm", "Action": action, "IDs": ids, "Back": r.PostFormValue("back")}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, "bulk", data)
		return
	}
	type result struct {
		ID, New, Err string
	}
	var results []result
	ok := 0
	for _, id := range ids {
		a := c.call(r, "POST", "/v1/executions/"+url.PathEscape(id)+"/"+action, nil)
		res := result{ID: id, Err: a.Err}
		if a.Err == "" {
			ok++
			if action == "rerun" {
				var x struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(a.Body, &x)
				res.New = x.ID
			}
		}
		results = append(results, res)
	}
	data["Title"], data["Results"], data["Done"], data["OK"] = "Done", results, true, ok
	c.render(w, r, "bulk", data)
}
