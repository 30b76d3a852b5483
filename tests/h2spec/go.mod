module colibri.local/h2spec

go 1.19

require github.com/summerwind/h2spec v2.2.1+incompatible
