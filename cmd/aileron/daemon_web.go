package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/admin"
)

// serveWeb starts the approvals page on admin.web_listen, over HTTPS when
// admin.web_tls_cert is set, and returns its server and bound address
// (nil and "" when the page is off). Approvals' review URLs point at it:
// https://WEB_HOST:PORT when it is published under a name.
// A login may approve a quarantined connector version there, through api.
func (d *daemon) serveWeb(errc chan<- error, api *admin.API) (*http.Server, string, error) {
	a := d.cfg.Admin
	if a.WebListen == "" {
		return nil, "", nil
	}
	wl, err := net.Listen("tcp", a.WebListen)
	if err != nil {
		return nil, "", fmt.Errorf("admin.web_listen %s: %w (change it, or set it to \"\" to turn the approvals page off)", a.WebListen, err)
	}
	scheme := "http"
	if a.WebTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(a.WebTLSCert, a.WebTLSKey)
		if err != nil {
			_ = wl.Close()
			return nil, "", fmt.Errorf("admin.web_tls_cert, admin.web_tls_key: %w", err)
		}
		wl, scheme = tls.NewListener(wl, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https"
	}
	web := &admin.Web{Approvals: d.approval, TokenFile: filepath.Join(d.cfg.Home, "keys", "admin.token"), Log: d.log,
		Hosts: a.WebHosts, SessionName: func(id string) string {
			info, err := d.sessions.Get(id)
			if err != nil {
				return "" // deleted or expired since: the id alone
			}
			return info.Name
		}, SessionLimits: d.sessionLimits,
		Quarantined: d.store.List, ApproveConnector: api.ApproveConnector,
		Proposals: d.proposal, AcceptProposal: api.AcceptProposal}
	srv := &http.Server{Handler: web.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { errc <- srv.Serve(wl) }()
	addr := wl.Addr().String()
	ap, err := netip.ParseAddrPort(addr)
	if err == nil {
		d.proxy.Guard.AddSelf(ap) // never dialled, whatever egress.allow_cidrs says
	}
	base := scheme + "://" + addr
	if len(a.WebHosts) > 0 && err == nil {
		base = scheme + "://" + net.JoinHostPort(a.WebHosts[0], fmt.Sprint(ap.Port()))
	}
	d.approval.ReviewURL = func(id string) string { return base + "/approvals/" + url.PathEscape(id) }
	d.webURL = base
	return srv, addr, nil
}
