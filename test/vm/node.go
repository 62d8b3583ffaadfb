package vm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/strata-dev/strata/test/simnode"
)

// DaemonNamespace and DaemonServiceAccount are where Strata's install
// (config/testcluster) puts the daemon's ServiceAccount.
const (
	DaemonNamespace      = "strata-system"
	DaemonServiceAccount = "strata-daemon"
)

// Node is the Node object of a VM and what its daemon needs to run as
// that node.
type Node struct {
	// Name is the Node's.
	Name string
	// ConfigDrive holds strata.env (NODE_NAME), a kubeconfig with the
	// node-bound token, and the working tree's strata-daemon: what the
	// base image's strata-daemon.service runs.
	ConfigDrive []File
}

// JoinNode registers a Node for a VM, kept Ready by kwok as the simulated
// nodes are (labels plus simnode's label and taint), and makes its daemon's
// credentials: a token of the strata-daemon ServiceAccount bound to a
// placeholder DaemonSet pod on that Node, which kwok runs, so that the API
// server names the node in the token and the daemon's
// ValidatingAdmissionPolicy confines it to that Node, as for a daemon pod
// on a real node. Node and DaemonSet are deleted when the test ends.
func JoinNode(t testing.TB, ctx context.Context, kubeconfig string, labels map[string]string) *Node {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	name := "vm-" + hex.EncodeToString(rnd[:])
	l := map[string]string{simnode.SimulatedLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: simnode.SimulatedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
	})

	// A DaemonSet of one placeholder pod on the Node (kwok runs it;
	// nothing pulls or starts its image): the token is bound to a pod the
	// drain before a reboot leaves alone, as it leaves the real daemon's.
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-daemon-" + name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"strata.dev/vm-daemon": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"strata.dev/vm-daemon": name}},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}},
						}}},
					}},
					ServiceAccountName: DaemonServiceAccount,
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:         []corev1.Container{{Name: "placeholder", Image: "127.0.0.1:5000/strata/pause:latest"}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets(DaemonNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the placeholder DaemonSet of node %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := cs.AppsV1().DaemonSets(DaemonNamespace).Delete(context.Background(), ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete daemonset %s: %v", ds.Name, err)
		}
	})
	grantReads(t, ctx, cs, name)
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(DaemonNamespace).List(ctx, metav1.ListOptions{LabelSelector: "strata.dev/vm-daemon=" + name})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return pod.Spec.NodeName == name, nil
	})
	if err != nil {
		t.Fatalf("no placeholder pod on node %s: %v", name, err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(DaemonNamespace).CreateToken(ctx, DaemonServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			ExpirationSeconds: ptr.To[int64](3 * 3600),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s bound to pod %s: %v", DaemonServiceAccount, pod.Name, err)
	}
	// Ready: the daemon's drain and the controller need it.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s is not Ready (is kwok running?): %v", name, err)
	}

	// The daemon's kubeconfig: the admin's server and CA, the node's token.
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := admin.Contexts[admin.CurrentContext]
	if cur == nil || admin.Clusters[cur.Cluster] == nil {
		t.Fatalf("kubeconfig %s has no current cluster", kubeconfig)
	}
	cl := admin.Clusters[cur.Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cl.Server, CertificateAuthorityData: cl.CertificateAuthorityData}
	if cl.CertificateAuthority != "" {
		ca, err := os.ReadFile(cl.CertificateAuthority)
		if err != nil {
			t.Fatal(err)
		}
		kc.Clusters["cluster"].CertificateAuthorityData = ca
	}
	kc.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["node"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "node"}
	kc.CurrentContext = "node"
	kcData, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := os.ReadFile(goBuild(t, "./cmd/strata-daemon"))
	if err != nil {
		t.Fatal(err)
	}
	return &Node{Name: name, ConfigDrive: []File{
		{Name: "strata.env", Data: []byte("NODE_NAME=" + name + "\n")},
		{Name: "kubeconfig", Data: kcData, Mode: 0o600},
		{Name: "strata-daemon", Data: daemon, Mode: 0o755},
	}}
}

// grantReads gives the strata-daemon ServiceAccount, while the test of
// node runs, the reads it no longer has (get of MachineConfigs and of
// the Secrets in strata-nodes): a real node's daemon reads its rendered
// configs and pull secret from the config server (--config-server), but
// the guest has no relay to it yet (hack/vm/base.sh relays the API
// server and the registry only), so the VM's daemon reads them from the
// API server as before.
func grantReads(t testing.TB, ctx context.Context, cs kubernetes.Interface, node string) {
	t.Helper()
	name := "strata-vm-reads-" + node
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: DaemonNamespace, Name: DaemonServiceAccount}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"machineconfiguration.strata.dev"}, Resources: []string{"machineconfigs"}, Verbs: []string{"get"}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "strata-nodes", Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	rbac := cs.RbacV1()
	for _, err := range []error{
		ignoreExists(rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})),
		ignoreExists(rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})),
		ignoreExists(rbac.Roles(r.Namespace).Create(ctx, r, metav1.CreateOptions{})),
		ignoreExists(rbac.RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatalf("grant the VM's daemon its reads: %v", err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.RoleBindings(rb.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.Roles(r.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
