package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/sandboxapi"
)

// openTools wires the sandbox API: the action runner over the proxy's one
// request path, the MCP server on Streamable HTTP, and the approval events
// that resume approved actions. The proxy answers the API host itself.
func (d *daemon) openTools() error {
	d.runner = &actions.Runner{
		DB: d.db, Approvals: d.approval, Exec: d.proxy, Policy: &d.policy, Catalog: d.catalog.Load,
		OnEvent: d.rec.Record, SessionByID: d.sessions.Session, Log: d.log, DefaultTimeout: d.cfg.Actions.DefaultTimeout,
	}
	srv := &sandboxapi.MCPServer{Name: "aileron", Version: readVersion().String(), Log: d.log}
	api := &sandboxapi.API{Policy: &d.policy, Catalog: d.catalog.Load, Exec: d.proxy, Runner: d.runner, Log: d.log,
		Access: proposalAccess{d.proposal}}
	d.mcp = srv.HTTPHandler(func(r *http.Request) (sandboxapi.ToolBackend, error) {
		sess, ok := dataplane.SessionFrom(r.Context())
		if !ok {
			return nil, errors.New("no session on this request")
		}
		return api.Backend(sess, d.runner.Backend(sess)), nil
	})
	api.MCP = d.mcp
	d.sandboxAPI = api
	d.proxy.SandboxAPI = api
	record := d.approval.OnEvent
	d.approval.OnEvent = func(event audit.EventName, details map[string]string) {
		record(event, details)
		switch event {
		case audit.EventApprovalApproved, audit.EventApprovalDenied, audit.EventApprovalExpired:
			d.runner.Decided(details["approval_id"])
		}
	}
	return d.runner.Start(context.Background())
}

// closeTools stops the MCP sessions and waits for running actions.
func (d *daemon) closeTools() error {
	if d.runner == nil {
		return nil
	}
	return errors.Join(d.mcp.Close(), d.runner.Close())
}

// loadCatalog collects the actions of the loaded packages. A package whose
// actions do not load, or whose action names clash with an earlier
// package's, keeps its connector operations but contributes no actions; the
// error says which and why.
func loadCatalog(srcs []policy.Source) (*action.Catalog, []error) {
	var errs []error
	var acts []action.Installed
	cat, _ := action.NewCatalog(nil)
	for _, src := range srcs {
		ref := src.Spec.Connector.FQN + "@" + src.Spec.Connector.Version
		ms, err := action.LoadPackage(filepath.Dir(src.Origin), src.Spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("actions of %s left out: %w", ref, err))
			continue
		}
		next := acts
		for _, m := range ms {
			next = append(next, action.Installed{Manifest: m, Connector: src.Spec.Connector.FQN,
				ConnectorVersion: src.Spec.Connector.Version, Hash: src.Hash})
		}
		c, err := action.NewCatalog(next)
		if err != nil {
			errs = append(errs, fmt.Errorf("actions of %s left out: %w", ref, err))
			continue
		}
		acts, cat = next, c
	}
	return cat, errs
}
