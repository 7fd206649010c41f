package gateway

import (
	"context"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// subscriptions are the gateway's clients' resources/subscribe: which sessions
// want notifications/resources/updated of which URI. The upstream is subscribed
// to a URI while at least one session is (and again on each new upstream
// connection); its updates go to those sessions only.
type subscriptions struct {
	byURI map[string]map[string]struct{} // guarded by Gateway.mu
}

// hooks are the mcp-go hooks that keep the subscriptions.
func (g *Gateway) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddBeforeSubscribe(func(ctx context.Context, _ any, req *mcpgo.SubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			g.subscribe(ctx, sess.SessionID(), req.Params.URI)
		}
	})
	h.AddBeforeUnsubscribe(func(ctx context.Context, _ any, req *mcpgo.UnsubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			g.unsubscribe(ctx, sess.SessionID(), req.Params.URI)
		}
	})
	h.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		g.mu.Lock()
		var gone []string
		for uri, ids := range g.subs.byURI {
			if _, ok := ids[sess.SessionID()]; ok {
				gone = append(gone, uri)
			}
		}
		g.mu.Unlock()
		for _, uri := range gone {
			g.unsubscribe(ctx, sess.SessionID(), uri)
		}
	})
	return h
}

func (g *Gateway) subscribe(ctx context.Context, session, uri string) {
	g.mu.Lock()
	ids := g.subs.byURI[uri]
	if ids == nil {
		ids = map[string]struct{}{}
		g.subs.byURI[uri] = ids
	}
	first := len(ids) == 0
	ids[session] = struct{}{}
	g.mu.Unlock()
	if first {
		if _, err := g.request(ctx, "resources/subscribe", map[string]string{"uri": uri}); err != nil {
			g.log.Debug().Err(err).Msg("subscribing the upstream to a resource")
		}
	}
}

func (g *Gateway) unsubscribe(ctx context.Context, session, uri string) {
	g.mu.Lock()
	ids := g.subs.byURI[uri]
	_, had := ids[session]
	delete(ids, session)
	last := had && len(ids) == 0
	if last {
		delete(g.subs.byURI, uri)
	}
	g.mu.Unlock()
	if last {
		if _, err := g.request(context.WithoutCancel(ctx), "resources/unsubscribe", map[string]string{"uri": uri}); err != nil {
			g.log.Debug().Err(err).Msg("unsubscribing the upstream from a resource")
		}
	}
}

// resubscribe subscribes a new upstream connection to every URI a session
// wants.
func (g *Gateway) resubscribe(ctx context.Context) {
	g.mu.Lock()
	uris := make([]string, 0, len(g.subs.byURI))
	for uri := range g.subs.byURI {
		uris = append(uris, uri)
	}
	g.mu.Unlock()
	for _, uri := range uris {
		if _, err := g.up.Call(ctx, "resources/subscribe", map[string]string{"uri": uri}, nil); err != nil {
			g.log.Debug().Err(err).Msg("subscribing the upstream to a resource again")
		}
	}
}

// updated passes an upstream's notifications/resources/updated on to the
// sessions subscribed to its URI.
func (g *Gateway) updated(params map[string]any) {
	uri, _ := params["uri"].(string)
	g.mu.Lock()
	ids := make([]string, 0, len(g.subs.byURI[uri]))
	for id := range g.subs.byURI[uri] {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		if err := g.srv.SendNotificationToSpecificClient(id, "notifications/resources/updated", params); err != nil {
			g.log.Debug().Err(err).Msg("passing a resource update on")
		}
	}
}
