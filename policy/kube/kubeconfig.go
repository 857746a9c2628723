package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The service account reef's RBAC (/usr/share/reef/rbac.yaml) names.
const (
	ServiceAccountNamespace = "kube-system"
	ServiceAccountName      = "reef"
)

// KubeconfigOptions are `reef kubeconfig`'s.
type KubeconfigOptions struct {
	Admin    string        // an admin's kubeconfig: /etc/kubernetes/admin.conf on kubeadm
	Out      string        // the kubeconfig to write: /etc/reef/kubeconfig
	Duration time.Duration // the token's lifetime
	Server   string        // the API server URL the node uses; "": the admin kubeconfig's
}

// WriteKubeconfig asks the API (as the admin) for a token of reef's
// service account through the TokenRequest API, and writes a kubeconfig
// with it, the cluster's CA and the server. It returns when the token
// expires: reef warns of that in the log and `reef status` 30 days
// before (TokenWarnBefore).
func WriteKubeconfig(ctx context.Context, o KubeconfigOptions) (time.Time, error) {
	admin, err := clientcmd.BuildConfigFromFlags("", o.Admin)
	if err != nil {
		return time.Time{}, fmt.Errorf("admin kubeconfig %s: %w", o.Admin, err)
	}
	s := runtime.NewScheme()
	if err := errors.Join(corev1.AddToScheme(s), authenticationv1.AddToScheme(s)); err != nil {
		return time.Time{}, err
	}
	cfg := rest.CopyConfig(admin)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return time.Time{}, err
	}
	var sa corev1.ServiceAccount
	err = c.Get().Namespace(ServiceAccountNamespace).Resource("serviceaccounts").Name(ServiceAccountName).Do(ctx).Into(&sa)
	if apierrors.IsNotFound(err) {
		return time.Time{}, fmt.Errorf("service account %s/%s does not exist: apply /usr/share/reef/rbac.yaml first (kubectl apply -f /usr/share/reef/rbac.yaml)",
			ServiceAccountNamespace, ServiceAccountName)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read service account %s/%s: %w", ServiceAccountNamespace, ServiceAccountName, err)
	}
	secs := int64(o.Duration / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}
	var tr authenticationv1.TokenRequest
	err = c.Post().Namespace(ServiceAccountNamespace).Resource("serviceaccounts").Name(ServiceAccountName).SubResource("token").
		Body(req).Do(ctx).Into(&tr)
	if err != nil {
		return time.Time{}, fmt.Errorf("request a token for service account %s/%s: %w", ServiceAccountNamespace, ServiceAccountName, err)
	}
	server := o.Server
	if server == "" {
		server = admin.Host
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return time.Time{}, fmt.Errorf("the admin kubeconfig's CA: %w", err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: len(ca) == 0 && admin.Insecure}
	kc.AuthInfos["reef"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["reef"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "reef"}
	kc.CurrentContext = "reef"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return time.Time{}, err
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return time.Time{}, err
	}
	tmp := o.Out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return time.Time{}, err
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return time.Time{}, err
	}
	return tr.Status.ExpirationTimestamp.Time, nil
}
