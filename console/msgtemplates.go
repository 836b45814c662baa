package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The Templates page (issue 36): the message templates email and sms
// nodes render, their versions, one version's sources, and a preview pane
// that renders it with sample data through /ui/api (POST
// /v1/templates/{name}/preview), so the token's role decides as for every
// API call. Reads go through the API in-process too.

// msgTemplate is a template version as the API shows it.
type msgTemplate struct {
	Name      string     `json:"name"`
	Version   int        `json:"version"`
	Subject   string     `json:"subject"`
	Text      string     `json:"text"`
	HTML      string     `json:"html"`
	Body      string     `json:"body"`
	Layout    string     `json:"layout"`
	CreatedAt time.Time  `json:"created_at"`
	DeletedAt *time.Time `json:"deleted_at"`
}

func (c *Console) templatesPage(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{"Title": "Templates"}
	var list []msgTemplate
	if err := c.call(r, "GET", "/v1/templates", nil).items(&list); err != nil {
		data["ListError"] = err.Error()
	}
	data["Items"] = list
	if name := r.URL.Query().Get("name"); name != "" {
		path := "/v1/templates/" + url.PathEscape(name)
		var versions []msgTemplate
		if err := c.call(r, "GET", path+"/versions", nil).items(&versions); err != nil {
			data["ShowError"] = err.Error()
		} else {
			version, _ := strconv.Atoi(r.URL.Query().Get("version"))
			if version <= 0 && len(versions) > 0 {
				version = versions[0].Version
			}
			var shown msgTemplate
			a := c.call(r, "GET", path+"/versions/"+strconv.Itoa(version), nil)
			if a.Err != "" {
				data["ShowError"] = a.Err
			} else if err := json.Unmarshal(a.Body, &shown); err != nil {
				data["ShowError"] = err.Error()
			} else {
				data["Shown"] = shown
			}
			data["Versions"] = versions
		}
		data["Name"] = name
	}
	c.render(w, r, "msgtemplates", data)
}
