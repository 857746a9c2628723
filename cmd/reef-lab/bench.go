package main

import (
	"context"
	"errors"
)

func bench(ctx context.Context, bin, out string) error {
	return errors.New("bench: not written yet")
}
