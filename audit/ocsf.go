package audit

import (
	"net"
	"strconv"
	"strings"
)

// OCSFVersion is the OCSF schema version OCSF maps to.
const OCSFVersion = "1.3.0"

// OCSF classes an audit line maps to.
const (
	ocsfBase            = 0    // Base Event: control-plane events
	ocsfNetworkActivity = 4001 // tunnels: passthrough, cut, blocked packets
	ocsfHTTPActivity    = 4002 // proxied and refused requests
	ocsfDNSActivity     = 4003 // refused DNS queries
)

// ocsfHTTPActivities are HTTP Activity's activity_id by method (OCSF
// 1.3; PATCH and others are 99 Other, with the method as activity_name).
var ocsfHTTPActivities = map[string]int{
	"CONNECT": 1, "DELETE": 2, "GET": 3, "HEAD": 4, "OPTIONS": 5, "POST": 6, "PUT": 7, "TRACE": 8,
}

// OCSF renders ev as an OCSF 1.3 event: HTTP Activity (4002) for the
// request path's lines, Network Activity (4001) for tunnels and packets
// the fence blocked, DNS Activity (4003) for refused names, and a Base
// Event (0) for the rest. What has no OCSF attribute goes in unmapped,
// under the audit line's own names; docs/audit.md has the table.
func OCSF(ev *Event) map[string]any {
	class, activity, name := ocsfClass(ev)
	o := map[string]any{
		"class_uid": class, "category_uid": class / 1000, "activity_id": activity, "activity_name": name,
		"type_uid": class*100 + activity, "time": ev.Time.UnixMilli(), "severity_id": 1,
		"metadata": map[string]any{
			"version": OCSFVersion, "log_name": "aileron.audit", "event_code": string(ev.Name),
			"sequence": ev.Seq, "uid": ocsfUID(ev), "original_time": ev.Time.Format("2006-01-02T15:04:05.999999999Z07:00"),
			"product": map[string]any{"name": "Aileron", "vendor_name": "Aileron"},
		},
	}
	status := 1 // Success
	switch ev.Decision {
	case "deny":
		o["action_id"], o["action"], o["disposition_id"], o["disposition"] = 2, "Denied", 2, "Blocked"
		o["severity_id"], status = 3, 2
	case "":
	default:
		o["action_id"], o["action"], o["disposition_id"], o["disposition"] = 1, "Allowed", 1, "Allowed"
	}
	if ev.Name == EventRejected || ev.Name == EventStoreTamperDetected || ev.Name == EventEgressBlocked || ev.Name == EventDNSDenied {
		o["severity_id"], status = 3, 2
	}
	o["status_id"], o["status"] = status, map[int]string{1: "Success", 2: "Failure"}[status]
	if ev.Reason != "" {
		o["status_detail"] = ev.Reason
	}
	if ev.Session != "" {
		o["actor"] = map[string]any{"session": map[string]any{"uid": ev.Session}}
	}
	if src := ocsfEndpoint(ev.Client); src != nil {
		o["src_endpoint"] = src
	}
	if ev.Host != "" {
		o["dst_endpoint"] = map[string]any{"hostname": ev.Host, "port": ev.Port}
	}
	if ev.DurationMS > 0 {
		o["duration"] = int64(ev.DurationMS)
	}
	if ev.BytesIn > 0 || ev.BytesOut > 0 {
		o["traffic"] = map[string]any{"bytes_in": ev.BytesIn, "bytes_out": ev.BytesOut}
	}
	if class == ocsfHTTPActivity {
		ocsfHTTP(o, ev)
	}
	if class == ocsfDNSActivity && ev.Details["name"] != "" {
		o["query"] = map[string]any{"hostname": ev.Details["name"], "type": ev.Details["type"]}
	}
	if u := ocsfUnmapped(ev); len(u) > 0 {
		o["unmapped"] = u
	}
	return o
}

func ocsfClass(ev *Event) (class, activity int, name string) {
	switch ev.Name {
	case EventProxied, EventCompleted, EventRejected, EventTurn:
		m := strings.ToUpper(ev.Method)
		if id, ok := ocsfHTTPActivities[m]; ok {
			return ocsfHTTPActivity, id, strings.ToUpper(m[:1]) + strings.ToLower(m[1:])
		}
		return ocsfHTTPActivity, 99, m
	case EventPassthrough:
		return ocsfNetworkActivity, 1, "Open"
	case EventPassthroughClosed, EventTunnelCut:
		return ocsfNetworkActivity, 2, "Close"
	case EventEgressBlocked:
		return ocsfNetworkActivity, 5, "Refuse"
	case EventDNSDenied:
		return ocsfDNSActivity, 1, "Query"
	}
	return ocsfBase, 99, string(ev.Name)
}

func ocsfHTTP(o map[string]any, ev *Event) {
	u := map[string]any{"hostname": ev.Host, "path": ev.Path, "scheme": "https"}
	hostport := ev.Host
	if ev.Port != 0 {
		u["port"] = ev.Port
		if ev.Port != 443 {
			hostport = net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port))
		}
	}
	u["url_string"] = "https://" + hostport + ev.Path
	req := map[string]any{"http_method": strings.ToUpper(ev.Method), "url": u}
	if ev.AuditID != "" {
		req["uid"] = ev.AuditID
	}
	o["http_request"] = req
	if ev.Status != 0 {
		o["http_response"] = map[string]any{"code": ev.Status}
	}
}

func ocsfEndpoint(addr string) map[string]any {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return map[string]any{"ip": addr}
	}
	ep := map[string]any{"ip": host}
	if p, err := strconv.Atoi(port); err == nil {
		ep["port"] = p
	}
	return ep
}

func ocsfUID(ev *Event) string {
	if ev.AuditID != "" && ev.Name == EventTurn { // a connection has a line per turn
		return ev.AuditID + "/" + string(ev.Name) + "/" + strconv.FormatUint(ev.Seq, 10)
	}
	if ev.AuditID != "" {
		return ev.AuditID + "/" + string(ev.Name)
	}
	return "seq-" + strconv.FormatUint(ev.Seq, 10)
}

// ocsfUnmapped keeps what OCSF has no attribute for, under the audit
// line's names, so nothing of the line is lost in the export.
func ocsfUnmapped(ev *Event) map[string]any {
	u := map[string]any{"prev_hash": ev.PrevHash}
	put := func(k, v string) {
		if v != "" {
			u[k] = v
		}
	}
	put("run_id", ev.RunID)
	put("parent_audit_id", ev.ParentAuditID)
	put("decision", ev.Decision)
	put("reason", ev.Reason)
	put("connector", ev.Connector)
	put("connector_version", ev.ConnectorVersion)
	put("connector_hash", ev.ConnectorHash)
	put("tool", ev.Tool)
	put("operation", ev.Operation)
	if ev.UpstreamStatus != 0 {
		u["upstream_status"] = ev.UpstreamStatus
	}
	if ev.UpstreamMS != 0 {
		u["upstream_ms"] = ev.UpstreamMS
	}
	put("model", ev.Model)
	if ev.Streamed {
		u["streamed"] = true
	}
	for k, n := range map[string]int64{"input_tokens": ev.InputTokens, "output_tokens": ev.OutputTokens, "cached_tokens": ev.CachedTokens} {
		if n != 0 {
			u[k] = n
		}
	}
	if ev.TTFBMS != 0 {
		u["ttfb_ms"] = ev.TTFBMS
	}
	if len(ev.Fields) > 0 {
		u["fields"] = ev.Fields
	}
	if len(ev.Details) > 0 {
		u["details"] = ev.Details
	}
	return u
}
