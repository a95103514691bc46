// One HTTPS request through the proxy in HTTPS_PROXY, the way a Node 20
// program must do it (Node's http stack ignores HTTPS_PROXY): open a CONNECT
// tunnel, then TLS over it. The session CA comes from NODE_EXTRA_CA_CERTS.
//
// usage: node client.js METHOD URL [JSON_BODY]
// Prints {"status", "headers", "body", "stage"} or {"error"} as JSON.
'use strict';
const http = require('http');
const tls = require('tls');

const [method, target, body] = process.argv.slice(2);
const proxyEnv = process.env.HTTPS_PROXY || process.env.https_proxy;

function out(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
  process.exit(0);
}
function fail(err) {
  out({ error: String(err && err.stack || err) });
}

if (!proxyEnv) fail('HTTPS_PROXY is not set');
const proxy = new URL(proxyEnv);
const u = new URL(target);
const port = u.port || '443';
const authority = `${u.hostname}:${port}`;
const creds = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');

const connectReq = http.request({
  host: proxy.hostname,
  port: proxy.port || 80,
  method: 'CONNECT',
  path: authority,
  headers: { Host: authority, 'Proxy-Authorization': 'Basic ' + creds },
});
connectReq.on('error', fail);
connectReq.on('connect', (res, socket) => {
  if (res.statusCode !== 200) {
    socket.destroy();
    out({ stage: 'connect', status: res.statusCode, headers: res.headers, body: '' });
    return;
  }
  const tsock = tls.connect({ socket, servername: u.hostname });
  tsock.on('error', fail);
  const headers = { Host: u.port ? authority : u.hostname };
  if (body) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = Buffer.byteLength(body);
  }
  const req = http.request({
    method,
    path: u.pathname + u.search,
    setHost: false,
    headers,
    createConnection: () => tsock,
  });
  req.on('error', fail);
  req.on('response', (r) => {
    const chunks = [];
    r.on('data', (c) => chunks.push(c));
    r.on('end', () => {
      tsock.destroy();
      out({ stage: 'request', status: r.statusCode, headers: r.headers, body: Buffer.concat(chunks).toString('utf8') });
    });
    r.on('error', fail);
  });
  req.end(body || undefined);
});
connectReq.end();
