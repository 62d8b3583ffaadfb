package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// apiWrites counts the API server's write requests by "VERB resource",
// from its apiserver_request_total: what a case cost the control plane,
// whoever made the requests (daemons, controllers, kwok, the bench).
type apiWrites map[string]float64

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

// apiWriteCounts reads the API server's counters now.
func (b *bench) apiWriteCounts(ctx context.Context) (apiWrites, error) {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's metrics: %w", err)
	}
	return parseAPIWrites(raw), nil
}

func parseAPIWrites(raw []byte) apiWrites {
	counts := apiWrites{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		l := promLabels(labels)
		if !writeVerbs[l["verb"]] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		counts[l["verb"]+" "+res] += v
	}
	return counts
}

// promLabels parses a Prometheus sample's label list (a="x",b="y"),
// with the format's escapes in the values.
func promLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		key, rest, ok := strings.Cut(strings.TrimPrefix(s, ","), `="`)
		if !ok {
			break
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			v.WriteByte(rest[i])
		}
		out[key] = v.String()
		if i >= len(rest) {
			break
		}
		s = rest[i+1:]
	}
	return out
}

// since is the writes made between before and w.
func (w apiWrites) since(before apiWrites) apiWrites {
	d := apiWrites{}
	for k, v := range w {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func (w apiWrites) total() int {
	t := 0.0
	for _, v := range w {
		t += v
	}
	return int(t)
}

// String lists the writes, the most frequent first.
func (w apiWrites) String() string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if w[keys[i]] != w[keys[j]] {
			return w[keys[i]] > w[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, int(w[k]))
	}
	return strings.Join(parts, ", ")
}
