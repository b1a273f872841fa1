package main

// boundsChecked reports whether this build checks slice bounds: indexing one past the end
// panics when it does, and reads (harmlessly, from the array's own padding word) when
// built with -gcflags=-B.
func boundsChecked() (checked bool) {
	defer func() {
		if recover() != nil {
			checked = true
		}
	}()
	arr := [2]uint32{1, 2}
	s := arr[:1]
	i := len(s)
	_ = s[i]
	return false
}
