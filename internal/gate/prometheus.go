package gate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// maxResponse bounds what is read of a Prometheus answer; a server with
// more firing alerts than that holds the rollout anyway.
const maxResponse = 8 << 20

// Alert is a Prometheus alert as /api/v1/alerts lists it.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Name is the alert's name (its alertname label).
func (a Alert) Name() string { return a.Labels["alertname"] }

// QueryResult is an instant query's answer: its type and, for a vector
// or matrix, how many series it holds and the first one's labels.
type QueryResult struct {
	Type   string
	Series int
	First  map[string]string
}

// PrometheusAPI is what the gate needs of a Prometheus server.
type PrometheusAPI interface {
	Alerts(ctx context.Context) ([]Alert, error)
	Query(ctx context.Context, q string) (QueryResult, error)
}

// prometheus evaluates a Prometheus gate: "" when it passes, else why
// it holds, and the detail for the log.
func (e *Evaluator) prometheus(ctx context.Context, g *v1alpha1.PrometheusGate) (msg, detail string) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	api, closeAPI, err := e.prometheusClient(ctx, g)
	if err != nil {
		return unevaluated(err)
	}
	defer closeAPI()
	return checkPrometheus(ctx, api, g)
}

// unevaluated is the message and detail of a gate that could not be
// evaluated.
func unevaluated(err error) (msg, detail string) {
	msg = "could not be evaluated: " + err.Error()
	var d *detailed
	if errors.As(err, &d) {
		detail = d.detail
	}
	return msg, detail
}

// CheckPrometheus asks api what g asks: "" when the gate passes, else
// why it holds.
func CheckPrometheus(ctx context.Context, api PrometheusAPI, g *v1alpha1.PrometheusGate) string {
	msg, _ := checkPrometheus(ctx, api, g)
	return msg
}

func checkPrometheus(ctx context.Context, api PrometheusAPI, g *v1alpha1.PrometheusGate) (msg, detail string) {
	if g.Alerts != nil {
		alerts, err := api.Alerts(ctx)
		if err != nil {
			return unevaluated(fmt.Errorf("cannot list the alerts: %w", err))
		}
		firing, err := FiringAlerts(g.Alerts, alerts)
		if err != nil {
			return err.Error(), ""
		}
		if len(firing) > 0 {
			return "firing: " + strings.Join(firing, ", "), ""
		}
		return "", ""
	}
	res, err := api.Query(ctx, g.Query)
	if err != nil {
		return unevaluated(fmt.Errorf("cannot run the query %s: %w", g.Query, err))
	}
	switch res.Type {
	case "vector", "matrix":
	default:
		return fmt.Sprintf("the query %s returned a %s, want an empty vector", g.Query, res.Type), ""
	}
	if res.Series > 0 {
		return fmt.Sprintf("the query %s returned %d series, the first %s", g.Query, res.Series, labelString(res.First)), ""
	}
	return "", ""
}

// maxAlertsNamed bounds how many alerts a message names.
const maxAlertsNamed = 5

// FiringAlerts returns the firing alerts f selects, each as its name and
// labels (without alertname), sorted; at most maxAlertsNamed and then how
// many more.
func FiringAlerts(f *v1alpha1.AlertFilter, alerts []Alert) ([]string, error) {
	match, err := compileName(f.NameRegexp)
	if err != nil {
		return nil, fmt.Errorf("alerts.nameRegexp: %w", err)
	}
	ignore, err := compileName(f.IgnoreNameRegexp)
	if err != nil {
		return nil, fmt.Errorf("alerts.ignoreNameRegexp: %w", err)
	}
	var out []string
	for _, a := range alerts {
		if a.State != "firing" {
			continue
		}
		name := a.Name()
		if (match != nil && !match.MatchString(name)) || (ignore != nil && ignore.MatchString(name)) {
			continue
		}
		if !hasLabels(a.Labels, f.Labels) {
			continue
		}
		rest := maps.Clone(a.Labels)
		delete(rest, "alertname")
		out = append(out, name+labelString(rest))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxAlertsNamed {
		out = append(out[:maxAlertsNamed], fmt.Sprintf("and %d more", len(out)-maxAlertsNamed))
	}
	return out, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// labelString writes labels as PromQL does: {a="1", b="2"}, sorted.
func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, l[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// httpAPI is PrometheusAPI over Prometheus's HTTP API.
type httpAPI struct {
	base   *url.URL
	client *http.Client
	// token is sent as a bearer token. It must never reach an error or
	// a log: only the request header carries it.
	token string
}

// NewHTTPAPI returns the API of the server at base, with client (nil is
// http.DefaultClient) and an optional bearer token.
func NewHTTPAPI(base string, c *http.Client, token string) (PrometheusAPI, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if c == nil {
		c = http.DefaultClient
	}
	return &httpAPI{base: u, client: c, token: token}, nil
}

// envelope is every answer of the HTTP API.
type envelope struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func (a *httpAPI) get(ctx context.Context, path string, q url.Values, out any) error {
	u := a.base.JoinPath(path)
	u.RawQuery = q.Encode()
	// Messages name the server and path as the gate's author wrote them,
	// and what went wrong by its kind; the server's own words (and Go's,
	// which quote it) go to the detail only.
	where := a.base.Redacted() + " " + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return safeError(where, err, "invalid request")
	}
	req.Header.Set("Accept", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return safeError(where, err, httpFailure(ctx, err))
	}
	defer resp.Body.Close()
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return safeError(where, err, "reading the answer: "+httpFailure(ctx, err))
	}
	if len(body) > maxResponse {
		return fmt.Errorf("%s answered more than %d bytes", where, maxResponse)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s answered %s, not the Prometheus API's JSON", where, status)
	}
	if env.Status != "success" {
		msg := fmt.Sprintf("%s answered %s", where, status)
		if errorType.MatchString(env.ErrorType) {
			msg += ": " + env.ErrorType
		}
		return &detailed{msg: msg, detail: env.ErrorType + ": " + env.Error}
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return safeError(where, err, "not the Prometheus API's data")
	}
	return nil
}

// errorType is what a Prometheus errorType looks like (bad_data,
// timeout, ...): only such a word of an error answer is shown.
var errorType = regexp.MustCompile(`^[a-z_]{1,32}$`)

func (a *httpAPI) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := a.get(ctx, "api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

func (a *httpAPI) Query(ctx context.Context, q string) (QueryResult, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := a.get(ctx, "api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return QueryResult{}, err
	}
	res := QueryResult{Type: data.ResultType}
	if res.Type == "vector" || res.Type == "matrix" {
		var series []struct {
			Metric map[string]string `json:"metric"`
		}
		if err := json.Unmarshal(data.Result, &series); err != nil {
			return res, fmt.Errorf("the %s result: %w", res.Type, err)
		}
		res.Series = len(series)
		if len(series) > 0 {
			res.First = series[0].Metric
		}
	}
	return res, nil
}

// prometheusClient builds the API for g: its CA and token read from the
// evaluator's namespace. The returned func releases its connections.
func (e *Evaluator) prometheusClient(ctx context.Context, g *v1alpha1.PrometheusGate) (PrometheusAPI, func(), error) {
	if err := credentialsOverHTTPS(g); err != nil {
		return nil, nil, err
	}
	var tr *http.Transport
	if e.Transport != nil {
		tr = e.Transport.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	if g.CA != nil {
		pem, what, err := e.caBundle(ctx, g.CA)
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("ca: %s holds no PEM certificate", what)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var token string
	if ref := g.BearerTokenSecret; ref != nil {
		v, what, err := e.secretKey(ctx, ref.Name, ref.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("bearerTokenSecret: %w", err)
		}
		token = strings.TrimSpace(string(v))
		if token == "" {
			return nil, nil, fmt.Errorf("bearerTokenSecret: %s is empty", what)
		}
	}
	api, err := NewHTTPAPI(g.URL, &http.Client{Transport: tr}, token)
	if err != nil {
		return nil, nil, err
	}
	return api, tr.CloseIdleConnections, nil
}

// errTokenOverHTTP refuses a bearer token to a URL that is not https: it
// would cross the network in the clear.
var errTokenOverHTTP = errors.New("bearerTokenSecret is set but url is not https: a token is sent only over https")

// credentialsOverHTTPS refuses a gate that would send its token in the
// clear.
func credentialsOverHTTPS(g *v1alpha1.PrometheusGate) error {
	if g.BearerTokenSecret == nil {
		return nil
	}
	u, err := url.Parse(g.URL)
	if err != nil || u.Scheme != "https" {
		return errTokenOverHTTP
	}
	return nil
}

// caBundle reads a CA bundle; what names where it came from.
func (e *Evaluator) caBundle(ctx context.Context, src *v1alpha1.CABundleSource) ([]byte, string, error) {
	if ref := src.SecretKeyRef; ref != nil {
		v, what, err := e.secretKey(ctx, ref.Name, ref.Key)
		if err != nil {
			return nil, "", fmt.Errorf("ca: %w", err)
		}
		return v, what, nil
	}
	ref := src.ConfigMapKeyRef
	if ref == nil {
		return nil, "", errors.New("ca: neither configMapKeyRef nor secretKeyRef is set")
	}
	what := fmt.Sprintf("key %s of ConfigMap %s/%s", ref.Key, e.Namespace, ref.Name)
	var cm corev1.ConfigMap
	if err := e.credentials().Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: ref.Name}, &cm); err != nil {
		return nil, "", safeError("ca: "+what, err, apiFailure(ctx, err))
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return []byte(v), what, nil
	}
	if v, ok := cm.BinaryData[ref.Key]; ok {
		return v, what, nil
	}
	return nil, "", fmt.Errorf("ca: %s: no such key", what)
}

// secretKey reads one key of a Secret in the evaluator's namespace that
// an admin labelled for gates (v1alpha1.GateCredentialsLabel=true): an
// unlabelled Secret is never fetched, and is refused in the same words as
// a missing one, so that a gate cannot tell the two apart. Its errors
// name the Secret and key, never the value.
func (e *Evaluator) secretKey(ctx context.Context, name, key string) ([]byte, string, error) {
	what := fmt.Sprintf("key %s of Secret %s/%s", key, e.Namespace, name)
	var list corev1.SecretList
	err := e.credentials().List(ctx, &list, client.InNamespace(e.Namespace),
		client.MatchingLabels{v1alpha1.GateCredentialsLabel: "true"},
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		return nil, "", safeError(what, err, apiFailure(ctx, err))
	}
	if len(list.Items) != 1 {
		return nil, "", fmt.Errorf("%s: no Secret of that name is labelled %s=true (only Secrets an admin labels for gates are read)",
			what, v1alpha1.GateCredentialsLabel)
	}
	v, ok := list.Items[0].Data[key]
	if !ok {
		return nil, "", fmt.Errorf("%s: no such key", what)
	}
	return v, what, nil
}
