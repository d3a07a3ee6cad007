// Package compat is the compatibility entry POST /cminmsgs/send (R-A7, seed
// C-28, US-02, G-COMPAT-HTTP): systems that used to hand messages to the
// predecessor over HTTP keep doing so, and the message lands in CMINMSGS
// exactly as if the adapter had inserted it. From there it takes the same
// path as every other row (scanner → msgx.inbox → processor), so the entry
// adds no second way into the pipeline and no ordering exceptions.
//
// The answer means only "accepted and persisted": 200 with the new
// CMINMSGS_ID as text/plain once the insert has committed. It says nothing
// about processing, which may fail or be skipped later. Every failure is a
// JSON body {"error": code, "message": text} with an error status and never
// carries an ID, so a client can never mistake a failure for an accepted
// message.
//
// Bodies are text: text/xml, application/xml or text/plain, charset UTF-8
// unless declared. A declared charset (GBK, GB18030, GB2312, Big5,
// ISO-8859-1, …) is converted to UTF-8 before storing, because CMINMSGS holds
// text, not bytes. An unknown charset is 415 with code
// "unsupported_charset": the request's media type parameter is what we cannot
// handle, which is the meaning of 415; bytes that are invalid in the
// declared (or default) charset are 400 "invalid_encoding": the client sent
// the wrong bytes. The message itself is never parsed (R-A8); an XML
// declaration's encoding pseudo-attribute is left as sent, since the stored
// text is UTF-8 whatever it says.
package compat
