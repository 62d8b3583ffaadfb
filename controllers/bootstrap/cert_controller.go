package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// ServiceName is the config server's Service (config/configserver).
const ServiceName = "strata-config-server"

// ServerNamesAnnotation on the config server's Service lists further
// names (DNS names or IPs, comma separated) nodes reach it by: a load
// balancer's, a node port's address. The serving certificate carries
// them.
const ServerNamesAnnotation = v1alpha1.Prefix + "server-names"

// CAKey is the key of the CA's certificate in both Secrets and of its
// private key in the CA Secret.
const (
	CAKey    = "ca.crt"
	CAKeyKey = "ca.key"
)

// CAConfigMap is the ConfigMap in strata-system that publishes the CA's
// certificate (ca.crt, nothing secret): the daemons' pods mount it to
// trust the config server they read their node's inputs from, as pods
// mount kube-root-ca.crt to trust the API server.
const CAConfigMap = "strata-config-server-ca"

// recheck bounds how long a change of the Service's names (which is not
// watched: the controller may only get it) goes unnoticed.
const recheck = 10 * time.Minute

// CertReconciler keeps the config server's CA and serving certificate.
type CertReconciler struct {
	Client client.Client
	// APIReader gets the Service, which the manager's cache does not hold.
	APIReader client.Reader
	// Namespace is strata-system: the Service and the CA, whose key the
	// config server never sees.
	Namespace string
	// SecretNamespace holds the serving certificate
	// (strata-config-server, the only Secrets the config server reads).
	SecretNamespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",namespace=strata-config-server,resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=services,verbs=get
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=configmaps,verbs=get;create
// +kubebuilder:rbac:groups="",namespace=strata-system,resources=configmaps,resourceNames=strata-config-server-ca,verbs=update

// SetupWithManager registers the reconciler on the two Secrets.
func (r *CertReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ours := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return (o.GetNamespace() == r.SecretNamespace && o.GetName() == v1alpha1.ConfigServerTLSSecret) ||
			(o.GetNamespace() == r.Namespace && o.GetName() == v1alpha1.ConfigServerCASecret)
	}))
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.SecretNamespace, Name: v1alpha1.ConfigServerTLSSecret}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("configservercert").
		WatchesRawSource(startSource(r.SecretNamespace)).
		Watches(&corev1.Secret{}, one, ours).
		Complete(r)
}

// Reconcile makes the CA once and the serving certificate whenever it is
// missing, due, signed by another CA or for other names.
func (r *CertReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	logger := log.FromContext(ctx)
	ca, caAt, err := r.ensureCA(ctx, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publishCA(ctx, ca.cert); err != nil {
		return ctrl.Result{}, err
	}
	names, err := r.names(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: r.SecretNamespace, Name: v1alpha1.ConfigServerTLSSecret}
	var sec corev1.Secret
	err = r.Client.Get(ctx, key, &sec)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("get %s: %w", key, err)
	}
	var at time.Time
	why := "missing"
	if err == nil {
		at, why = servingFresh(keyPair{cert: sec.Data[corev1.TLSCertKey], key: sec.Data[corev1.TLSPrivateKeyKey]}, ca, names, now)
		if why == "" {
			return ctrl.Result{RequeueAfter: min(at.Sub(now), caAt.Sub(now), recheck)}, nil
		}
		// The controller may not update these Secrets: replace.
		pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
		if err := r.Client.Delete(ctx, &sec, pre); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete %s to renew it: %w", key, err)
		}
	}
	kp, err := newServing(ca, names, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: kp.cert, corev1.TLSPrivateKeyKey: kp.key, CAKey: ca.cert},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create %s: %w", key, err)
	}
	logger.Info("Issued the config server's serving certificate", "secret", key.String(), "names", names, "why", why)
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// ensureCA returns the CA, made when there is none or it is due.
func (r *CertReconciler) ensureCA(ctx context.Context, now time.Time) (keyPair, time.Time, error) {
	key := types.NamespacedName{Namespace: r.Namespace, Name: v1alpha1.ConfigServerCASecret}
	var sec corev1.Secret
	err := r.Client.Get(ctx, key, &sec)
	if client.IgnoreNotFound(err) != nil {
		return keyPair{}, time.Time{}, fmt.Errorf("get %s: %w", key, err)
	}
	if err == nil {
		ca := keyPair{cert: sec.Data[CAKey], key: sec.Data[CAKeyKey]}
		at, why := caFresh(ca, now)
		if why == "" {
			return ca, at, nil
		}
		log.FromContext(ctx).Info("Replacing the config server's CA: pointer configs made before need the new CA (stratactl node-config)", "why", why)
		pre := client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion}
		if err := r.Client.Delete(ctx, &sec, pre); client.IgnoreNotFound(err) != nil {
			return keyPair{}, time.Time{}, fmt.Errorf("delete %s to renew it: %w", key, err)
		}
	}
	ca, err := newCA(now)
	if err != nil {
		return keyPair{}, time.Time{}, err
	}
	err = r.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{CAKey: ca.cert, CAKeyKey: ca.key},
	})
	if err != nil {
		// Made meanwhile (another replica): use that one next time.
		return keyPair{}, time.Time{}, fmt.Errorf("create %s: %w", key, err)
	}
	log.FromContext(ctx).Info("Made the config server's CA", "secret", key.String())
	c, _, _ := parse(ca)
	return ca, renewAt(c.NotBefore, c.NotAfter), nil
}

// publishCA writes the CA's certificate to CAConfigMap (read uncached:
// the controller may not list ConfigMaps).
func (r *CertReconciler) publishCA(ctx context.Context, cert []byte) error {
	key := types.NamespacedName{Namespace: r.Namespace, Name: CAConfigMap}
	var cm corev1.ConfigMap
	err := r.APIReader.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string]string{CAKey: string(cert)}}
		if err := r.Client.Create(ctx, &cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if cm.Data[CAKey] == string(cert) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[CAKey] = string(cert)
	if err := r.Client.Update(ctx, &cm); err != nil {
		return fmt.Errorf("update %s: %w", key, err)
	}
	log.FromContext(ctx).Info("Published the config server's CA", "configMap", key.String())
	return nil
}

// names are those nodes may reach the server by: the Service's DNS
// names, its IPs, and its server-names annotation.
func (r *CertReconciler) names(ctx context.Context) ([]string, error) {
	names := []string{
		ServiceName + "." + r.Namespace + ".svc",
		ServiceName + "." + r.Namespace + ".svc.cluster.local",
	}
	var svc corev1.Service
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: ServiceName}, &svc)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("get service %s/%s: %w", r.Namespace, ServiceName, err)
	}
	if err == nil {
		if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
			names = append(names, ip)
		}
		names = append(names, svc.Spec.ExternalIPs...)
		for _, in := range svc.Status.LoadBalancer.Ingress {
			names = append(names, in.IP, in.Hostname)
		}
		for n := range strings.SplitSeq(svc.Annotations[ServerNamesAnnotation], ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	names = slices.DeleteFunc(names, func(s string) bool { return s == "" })
	slices.Sort(names[2:])
	return slices.Compact(names), nil
}
