package sis_test

import (
	"errors"
	"fmt"

	"msgexchange/services/internal/sis"
)

func ExampleDecode() {
	raw := []byte(`<?xml version="1.0" encoding="UTF-8"?>
<MSG xmlns:xsi = "http://www.w3.org/2001/XMLSchema-instance">
	<META><SNDR>AODB</SNDR><SEQN>604555</SEQN><DTTM>20261201100028</DTTM><TYPE>FLOP</TYPE><STYP>DELY</STYP></META>
	<FLOP>
		<FLID>1003</FLID>
		<DELY CODE="RA" STRT="01DEC261015" DURA="0040">Late inbound aircraft</DELY>
		<PADT/>
	</FLOP>
</MSG>`)
	m, err := sis.Decode(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	flop := m.Root.Child("FLOP")
	dely := flop.Child("DELY")
	code, _ := dely.AttrValue("CODE")
	fmt.Println(m.Meta.TYPE, m.Meta.STYP, flop.Child("FLID").Value())
	fmt.Println(code, dely.Text)
	fmt.Println("PADT cleared:", flop.Child("PADT").Empty, "TOBT present:", flop.Has("TOBT"))
	// Output:
	// FLOP DELY 1003
	// RA Late inbound aircraft
	// PADT cleared: true TOBT present: false
}

func ExampleClassify() {
	raw := []byte(`<MSG><META><SNDR>AODB</SNDR><SEQN>604555</SEQN><DTTM>20261201100028</DTTM>` +
		`<TYPE>FLOP</TYPE><STYP>CNCL</STYP></META><FLOP><FLID>1008</FLID><CNCL>01DEC261402</CNCL></FLOP></MSG>`)
	m, err := sis.Decode(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := sis.Classify(m, sis.IdentityOptions{IncludeDayBoundary: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Kind, c.Handler, c.IdentityKey)

	_, err = sis.Decode([]byte(`<?xml version="1.0" encoding="x-unknown"?><MSG/>`))
	fmt.Println(errors.Is(err, sis.ErrCodec), err)
	// Output:
	// FLIGHT_OPERATION FLOP_CNCL AODB|FLOP|CNCL|604555|20261201
	// true sis: CODEC_ERROR: declared encoding "x-unknown" is unknown or not supported; send UTF-8 or add the charset to the codec
}
