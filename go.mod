module github.com/rune-org/rune

go 1.26.8
