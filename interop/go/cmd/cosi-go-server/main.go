// Command cosi-go-server serves Go COSI's in-memory state over gRPC, for the
// interoperability tests of the Rust implementation.
//
// The state is built the way Go COSI's own gRPC tests build it
// (state.WrapCore(namespaced.NewState(inmem.Build))) and accepts any namespace
// and type; its meta namespace holds the default resource definitions, as a
// Talos state's does. Usage:
//
//	cosi-go-server ADDRESS
//
// where ADDRESS is HOST:PORT (port 0 picks a free one) or unix:PATH. Once
// listening it prints "listening on ADDRESS" with the actual address on
// standard output; it stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/cosi-project/runtime/pkg/state/registry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cosi-go-server: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: cosi-go-server HOST:PORT|unix:PATH")
	}

	network, address := "tcp", os.Args[1]
	if path, ok := strings.CutPrefix(address, "unix:"); ok {
		network, address = "unix", path
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	listener, err := (&net.ListenConfig{}).Listen(ctx, network, address)
	if err != nil {
		return err
	}

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	if err = registry.NewNamespaceRegistry(st).RegisterDefault(ctx); err != nil {
		return err
	}

	if err = registry.NewResourceRegistry(st).RegisterDefault(ctx); err != nil {
		return err
	}

	grpcServer := grpc.NewServer()
	v1alpha1.RegisterStateServer(grpcServer, server.NewState(st))

	fmt.Printf("listening on %s\n", listener.Addr())

	go func() {
		<-ctx.Done()
		grpcServer.Stop()
	}()

	return grpcServer.Serve(listener)
}
