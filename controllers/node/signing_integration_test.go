package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Issue 24: a signed pool's image waits for its signature, since every
// node would refuse it unsigned; once ImageSigned=True it rolls out, and
// each node taken gets the policy it must verify with (the push
// repository and the trusted keys).
func TestSignatureGateHoldsNodesUntilSigned(t *testing.T) {
	f := newFixture(t, "signgate", 1, nil)
	f.layer("rendered-signgate-1", image('a'))
	key, err := os.ReadFile(filepath.Join("..", "..", "sigpolicy", "testdata", "old.pub"))
	must(t, err)
	ctx := context.Background()
	mosc := &v1alpha1.MachineOSConfig{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Name: "signgate"}, mosc))
	mosc.Spec.Signing = &v1alpha1.ImageSigning{KeySecret: v1alpha1.LocalObjectReference{Name: "key"}, PublicKeys: []v1alpha1.PEMPublicKey{v1alpha1.PEMPublicKey(key)}}
	must(t, env.Client.Update(ctx, mosc))
	startController(t)

	f.waitCondition(v1alpha1.PoolUpdated, "False", v1alpha1.ReasonAwaitingImageSignature, "The image of build signgate-rendered-signgate-1 ("+image('a')+") waits for its signature")
	if got := f.taken("rendered-signgate-1", image('a')); len(got) != 0 {
		t.Fatalf("nodes %v were sent an unsigned image", got)
	}

	b := &v1alpha1.MachineOSBuild{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Name: "signgate-rendered-signgate-1"}, b))
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageSigned, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSigned, Message: "signed"})
	must(t, env.Client.Status().Update(ctx, b))
	node := f.waitTaken("rendered-signgate-1", image('a'), 1)[0]

	var p v1alpha1.NodeSignaturePolicy
	must(t, json.Unmarshal([]byte(f.node(node).Annotations[v1alpha1.ImageSignaturePolicyAnnotation]), &p))
	if p.Repository != "registry.example.com/os" || len(p.PublicKeys) != 1 || p.PublicKeys[0] != string(key) {
		t.Fatalf("node %s's signature policy %+v, want registry.example.com/os and the pool's key", node, p)
	}
}
