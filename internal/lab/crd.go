package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/reefcni/reef/internal/poll"
)

// crdResource is apiextensions.k8s.io/v1 customresourcedefinitions: the
// lab creates CRDs through the dynamic client, without linking the
// apiextensions API's module.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Dynamic is a dynamic client of AdminConfig, for custom resources.
func (k *KubeAPI) Dynamic() (dynamic.Interface, error) {
	return dynamic.NewForConfig(k.AdminConfig())
}

// ApplyCRDs creates the CustomResourceDefinitions of YAML documents (an
// upstream project's CRD file, as `kubectl create -f` does) and waits
// until the API server has established each; path names them in errors.
func (k *KubeAPI) ApplyCRDs(path string, data []byte) error {
	c, err := k.Dynamic()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			return fmt.Errorf("%s: a %s, want CustomResourceDefinitions only", path, obj.GetKind())
		}
		if _, err := c.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := waitEstablished(ctx, c, obj.GetName()); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// waitEstablished waits, until ctx's deadline, for the CRD's Established
// condition: from then on its resources are served.
func waitEstablished(ctx context.Context, c dynamic.Interface, name string) error {
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return poll.Until(timeout, func() error {
		got, err := c.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cv := range conds {
			if m, ok := cv.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established: conditions %v", name, conds)
	})
}

// CreateCustom creates a custom resource (cluster-scoped when namespace is
// "") from a typed object of its Go API.
func (k *KubeAPI) CreateCustom(gvr schema.GroupVersionResource, namespace string, obj runtime.Object) error {
	c, err := k.Dynamic()
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvr.GroupVersion().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Resource(gvr).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// DeleteCustom deletes a custom resource.
func (k *KubeAPI) DeleteCustom(gvr schema.GroupVersionResource, namespace, name string) error {
	c, err := k.Dynamic()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Resource(gvr).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// GetCustom reads a custom resource into obj, a typed object of its Go
// API.
func (k *KubeAPI) GetCustom(gvr schema.GroupVersionResource, namespace, name string, obj any) error {
	c, err := k.Dynamic()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := c.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// ClusterPolicyCRD is the ClusterNetworkPolicy CRD of the network-policy-api
// module at the version of the go.mod in dir (reef's), as the module ships
// it in channel ("standard" or "experimental"): its path, in the module
// cache, and its text. goCmd "" is go.
func ClusterPolicyCRD(ctx context.Context, goCmd, dir, channel string) (string, []byte, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Dir}}", NetpolAPIModule)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -m %s in %s: %w", NetpolAPIModule, dir, err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" {
		return "", nil, fmt.Errorf("go list -m %s in %s: not in the module cache (go mod download %s)", NetpolAPIModule, dir, NetpolAPIModule)
	}
	path := filepath.Join(mod, "config", "crd", channel, "policy.networking.k8s.io_clusternetworkpolicies.yaml")
	data, err := os.ReadFile(path)
	return path, data, err
}
