package gateway

import (
	"context"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// subscriptions are the gateway's clients' resources/subscribe: which sessions
// (of the gateway's own server, or of an Aggregate's) want
// notifications/resources/updated of which URI. The upstream is subscribed to a
// URI while at least one session is (and again on each new upstream
// connection); its updates go to those sessions only.
type subscriptions struct {
	byURI map[string]map[subscriber]struct{} // guarded by Gateway.mu
}

// subscriber is a session of srv.
type subscriber struct {
	srv *server.MCPServer
	id  string
}

// hooks are the mcp-go hooks that keep the subscriptions of the gateway's
// own server's sessions.
func (g *Gateway) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddBeforeSubscribe(func(ctx context.Context, _ any, req *mcpgo.SubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			g.subscribe(ctx, subscriber{g.srv, sess.SessionID()}, req.Params.URI)
		}
	})
	h.AddBeforeUnsubscribe(func(ctx context.Context, _ any, req *mcpgo.UnsubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			g.unsubscribe(ctx, subscriber{g.srv, sess.SessionID()}, req.Params.URI)
		}
	})
	h.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		g.forget(ctx, subscriber{g.srv, sess.SessionID()})
	})
	return h
}

// forget unsubscribes s from every URI.
func (g *Gateway) forget(ctx context.Context, s subscriber) {
	g.mu.Lock()
	var gone []string
	for uri, subs := range g.subs.byURI {
		if _, ok := subs[s]; ok {
			gone = append(gone, uri)
		}
	}
	g.mu.Unlock()
	for _, uri := range gone {
		g.unsubscribe(ctx, s, uri)
	}
}

func (g *Gateway) subscribe(ctx context.Context, s subscriber, uri string) {
	g.mu.Lock()
	subs := g.subs.byURI[uri]
	if subs == nil {
		subs = map[subscriber]struct{}{}
		g.subs.byURI[uri] = subs
	}
	first := len(subs) == 0
	subs[s] = struct{}{}
	g.mu.Unlock()
	if first && g.client() != nil {
		if _, err := g.request(ctx, "resources/subscribe", map[string]string{"uri": uri}); err != nil {
			g.log.Debug().Err(err).Msg("subscribing the upstream to a resource")
		}
	}
}

func (g *Gateway) unsubscribe(ctx context.Context, s subscriber, uri string) {
	g.mu.Lock()
	subs := g.subs.byURI[uri]
	_, had := subs[s]
	delete(subs, s)
	last := had && len(subs) == 0
	if last {
		delete(g.subs.byURI, uri)
	}
	g.mu.Unlock()
	if last && g.client() != nil {
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
		if _, err := g.client().Call(ctx, "resources/subscribe", map[string]string{"uri": uri}, nil); err != nil {
			g.log.Debug().Err(err).Msg("subscribing the upstream to a resource again")
		}
	}
}

// updated passes an upstream's notifications/resources/updated on to the
// sessions subscribed to its URI.
func (g *Gateway) updated(params map[string]any) {
	uri, _ := params["uri"].(string)
	g.mu.Lock()
	subs := make([]subscriber, 0, len(g.subs.byURI[uri]))
	for s := range g.subs.byURI[uri] {
		subs = append(subs, s)
	}
	g.mu.Unlock()
	for _, s := range subs {
		if err := s.srv.SendNotificationToSpecificClient(s.id, "notifications/resources/updated", params); err != nil {
			g.log.Debug().Err(err).Msg("passing a resource update on")
		}
	}
}
