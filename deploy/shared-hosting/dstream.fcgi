#!/bin/sh
# ~/public_html/dstream.fcgi (mode 0755): what mod_fcgid starts, with its listening
# socket as standard input. Settings go here: .htaccess SetEnv does not reach a
# FastCGI process's own environment. Replace /home/you by your home directory.
DSTREAM_DB=/home/you/dstream/var/dstream.db
# One process of a few threads: mod_fcgid sends it one request at a time per
# connection and starts more processes when they are busy.
DSTREAM_THREADS=4
# Below mod_fcgid's FcgidIOTimeout (40 s by default), which would cut a response.
DSTREAM_LONGPOLL_MS=25000
DSTREAM_SSE_MAX_MS=25000
export DSTREAM_DB DSTREAM_THREADS DSTREAM_LONGPOLL_MS DSTREAM_SSE_MAX_MS
exec /home/you/dstream/bin/dstream-fcgi
