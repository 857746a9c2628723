// Package kubeclient is what reef's readers and writers of the Kubernetes
// API share: REST clients with a scheme of only the groups each one uses
// (protobuf on the wire), informers trimmed on the way into their caches,
// and a probe of the API's /readyz. It stays clear of client-go's
// clientset, whose scheme registers every API group at init in every
// process that links it, with the API or without.
package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Config loads a kubeconfig for reef: its user agent, and no client-wide
// timeout (watches are long; each request is bounded by its context).
func Config(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "reef"
	cfg.Timeout = 0
	return cfg, nil
}

// Scheme is a scheme of the groups that add registers, with meta/v1's
// types (lists, status, watch events).
func Scheme(add ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	var errs []error
	for _, f := range add {
		errs = append(errs, f(s))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// REST is a client of one group version (core at /api, the others at
// /apis), protobuf on the wire, JSON accepted.
func REST(base *rest.Config, s *runtime.Scheme, gv schema.GroupVersion) (rest.Interface, error) {
	return client(base, s, gv, runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON)
}

// RESTJSON is REST in JSON only: custom resources have no protobuf.
func RESTJSON(base *rest.Config, s *runtime.Scheme, gv schema.GroupVersion) (rest.Interface, error) {
	return client(base, s, gv, runtime.ContentTypeJSON, runtime.ContentTypeJSON)
}

func client(base *rest.Config, s *runtime.Scheme, gv schema.GroupVersion, contentType, accept string) (rest.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	cfg.ContentType, cfg.AcceptContentTypes = contentType, accept
	return rest.RESTClientFor(cfg)
}

// Informer is a shared informer on resource in every namespace, with no
// periodic resync (every change comes as an event), each object trimmed
// by trim before the cache keeps it. failed gets each failed list or
// watch; changed runs after every add, update and delete (from the
// informer's goroutine: it must not block). Either may be nil.
func Informer(c rest.Interface, resource string, obj runtime.Object, trim cache.TransformFunc, failed func(error), changed func()) cache.SharedIndexInformer {
	lw := cache.NewListWatchFromClient(c, resource, metav1.NamespaceAll, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	if trim != nil {
		if err := inf.SetTransform(trim); err != nil {
			panic(err) // only before Run
		}
	}
	if failed != nil {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			failed(fmt.Errorf("watch %s: %w", resource, err))
		})
	}
	if changed != nil {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		})
	}
	return inf
}

// Probe asks the API's /readyz through c at once and then every interval
// until ctx ends, and calls ok or failed with each answer, then each (if
// not nil): what else its owner checks as often. client-go's reflectors
// retry a watch that cannot connect (connection refused) on their own,
// without a word to the error handler: only a probe tells that the API is
// gone.
func Probe(ctx context.Context, c rest.Interface, host string, every time.Duration, ok func(), failed func(error), each func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		var code int
		err := c.Get().AbsPath("/readyz").Do(rctx).StatusCode(&code).Error()
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && code == http.StatusOK:
			ok()
		case err == nil:
			failed(fmt.Errorf("probe %s/readyz: answered %d", host, code))
		default:
			failed(fmt.Errorf("probe %s/readyz: %w", host, err))
		}
		if each != nil {
			each()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
