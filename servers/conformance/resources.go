package conformance

import (
	"context"
	"encoding/json"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	staticTextURI = "test://static-text"
	staticBlobURI = "test://static-binary"
	watchedURI    = "test://watched-resource"
	templateURI   = "test://template/{id}/data"
)

func addResources(s *server.MCPServer) {
	s.AddResource(mcpgo.NewResource(staticTextURI, "static-text",
		mcpgo.WithResourceTitle("Static Text Resource"),
		mcpgo.WithResourceDescription("A static text resource."),
		mcpgo.WithMIMEType("text/plain"),
	), textResource("text/plain", "This is the content of the static text resource."))
	s.AddResource(mcpgo.NewResource(staticBlobURI, "static-binary",
		mcpgo.WithResourceTitle("Static Binary Resource"),
		mcpgo.WithResourceDescription("A static binary resource: a 1x1 PNG."),
		mcpgo.WithMIMEType("image/png"),
	), blobResource)
	s.AddResource(mcpgo.NewResource(watchedURI, "watched-resource",
		mcpgo.WithResourceTitle("Watched Resource"),
		mcpgo.WithResourceDescription("A resource to subscribe to. It never changes."),
		mcpgo.WithMIMEType("text/plain"),
	), textResource("text/plain", "Watched resource content"))
	s.AddResourceTemplate(mcpgo.NewResourceTemplate(templateURI, "template",
		mcpgo.WithTemplateTitle("Resource Template"),
		mcpgo.WithTemplateDescription("A resource template: the id in the URI is substituted into JSON data."),
		mcpgo.WithTemplateMIMEType("application/json"),
	), templateResource)
}

// textResource returns a handler answering with text, under the URI requested.
func textResource(mimeType, text string) server.ResourceHandlerFunc {
	return func(_ context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
		return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: req.Params.URI, MIMEType: mimeType, Text: text}}, nil
	}
}

func blobResource(_ context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
	return []mcpgo.ResourceContents{mcpgo.BlobResourceContents{URI: req.Params.URI, MIMEType: "image/png", Blob: pngPixel}}, nil
}

// templateResource answers test://template/{id}/data. mcp-go puts the variables
// it matched in Params.Arguments, as []string (the template library's value).
func templateResource(_ context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
	var id string
	switch v := req.Params.Arguments["id"].(type) {
	case string:
		id = v
	case []string:
		if len(v) == 1 {
			id = v[0]
		}
	}
	if id == "" {
		return nil, fmt.Errorf("resource %q: no id in the URI (template %s)", req.Params.URI, templateURI)
	}
	text, err := json.Marshal(struct {
		ID           string `json:"id"`
		TemplateTest bool   `json:"templateTest"`
		Data         string `json:"data"`
	}{id, true, "Data for ID: " + id})
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", req.Params.URI, err)
	}
	return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(text)}}, nil
}
