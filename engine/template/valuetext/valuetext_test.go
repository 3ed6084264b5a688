package valuetext

import (
	"math"
	"testing"
)

func TestFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{3, "3"},
		{-2.5, "-2.5"},
		{0, "0"},
		{1e21, "1e+21"},
		{1e-7, "1e-07"},
		{123456789, "123456789"},
		{math.Inf(1), "inf"},
		{math.NaN(), "nan"},
	}
	for _, tt := range tests {
		if got := Float(tt.f); got != tt.want {
			t.Errorf("Float(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
