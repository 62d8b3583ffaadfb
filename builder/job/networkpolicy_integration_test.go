package job

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/test/testenv"
)

// TestNetworkPolicy (issue 37 finding 10): the shipped NetworkPolicy
// (config/build) is accepted by the API server, selects the build pods
// this package makes, lets nothing in, and lets them reach DNS and public
// registries over HTTPS but nothing in the cluster, on the node or at the
// instance metadata service.
func TestNetworkPolicy(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "build", "networkpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(raw, &np); err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: np.Namespace}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, np.DeepCopy()); err != nil {
		t.Fatalf("the API server refuses config/build/networkpolicy.yaml: %v", err)
	}

	cfg, req := testRequest()
	_, jb, err := Objects(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if np.Namespace != jb.Namespace || !sel.Matches(labels.Set(jb.Spec.Template.Labels)) {
		t.Fatalf("policy %s/%s (selector %s) does not select the build pods of %s/%s (labels %v)",
			np.Namespace, np.Name, sel, jb.Namespace, jb.Name, jb.Spec.Template.Labels)
	}
	if sel.Matches(labels.Set{"app": "other"}) {
		t.Errorf("selector %s selects pods that are not builds", sel)
	}
	types := map[networkingv1.PolicyType]bool{}
	for _, pt := range np.Spec.PolicyTypes {
		types[pt] = true
	}
	if !types[networkingv1.PolicyTypeIngress] || !types[networkingv1.PolicyTypeEgress] || len(np.Spec.Ingress) != 0 {
		t.Errorf("policy types %v, ingress rules %v: want both types and no ingress rule", np.Spec.PolicyTypes, np.Spec.Ingress)
	}
	for _, tc := range []struct {
		name  string
		addr  string
		proto corev1.Protocol
		port  int32
		want  bool
	}{
		{"DNS over UDP at the cluster's resolver", "10.96.0.10", corev1.ProtocolUDP, 53, true},
		{"DNS over TCP at a node-local cache", "169.254.20.10", corev1.ProtocolTCP, 53, true},
		{"a public registry over HTTPS", "34.120.1.2", corev1.ProtocolTCP, 443, true},
		{"a public registry over IPv6", "2600:1f18::1", corev1.ProtocolTCP, 443, true},
		{"the API server's Service", "10.96.0.1", corev1.ProtocolTCP, 443, false},
		{"the API server on a private node address", "192.168.1.10", corev1.ProtocolTCP, 6443, false},
		{"a kubelet", "10.0.0.5", corev1.ProtocolTCP, 10250, false},
		{"the instance metadata service", "169.254.169.254", corev1.ProtocolTCP, 80, false},
		{"the instance metadata service over HTTPS", "169.254.169.254", corev1.ProtocolTCP, 443, false},
		{"a pod in a CGNAT pod range", "100.64.3.4", corev1.ProtocolTCP, 443, false},
		{"a pod over IPv6 ULA", "fd00::10", corev1.ProtocolTCP, 443, false},
		{"the node's loopback", "127.0.0.1", corev1.ProtocolTCP, 443, false},
		{"a public host on another port", "34.120.1.2", corev1.ProtocolTCP, 22, false},
	} {
		if got := egressAllows(t, np.Spec.Egress, netip.MustParseAddr(tc.addr), tc.proto, tc.port); got != tc.want {
			t.Errorf("%s (%s %s/%d): allowed %v, want %v", tc.name, tc.addr, tc.proto, tc.port, got, tc.want)
		}
	}
}

// egressAllows says whether rules let a pod connect to addr on proto/port,
// as NetworkPolicy reads them: any rule allows it when one of its ports
// (or none listed) and one of its peers (or none listed) match. Peers
// that select pods or namespaces match no address here: the rules under
// test must not name any.
func egressAllows(t *testing.T, rules []networkingv1.NetworkPolicyEgressRule, addr netip.Addr, proto corev1.Protocol, port int32) bool {
	t.Helper()
	for _, r := range rules {
		portOK := len(r.Ports) == 0
		for _, p := range r.Ports {
			pp := corev1.ProtocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if pp == proto && (p.Port == nil || p.Port.IntValue() == int(port)) {
				portOK = true
			}
		}
		peerOK := len(r.To) == 0
		for _, peer := range r.To {
			if peer.PodSelector != nil || peer.NamespaceSelector != nil {
				t.Errorf("egress peer %+v selects pods: every pod in the cluster could be one", peer)
				continue
			}
			if peer.IPBlock == nil {
				continue
			}
			if inBlock(t, peer.IPBlock, addr) {
				peerOK = true
			}
		}
		if portOK && peerOK {
			return true
		}
	}
	return false
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, addr netip.Addr) bool {
	t.Helper()
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		t.Fatal(err)
	}
	if !cidr.Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Contains(addr) {
			return false
		}
	}
	return true
}
