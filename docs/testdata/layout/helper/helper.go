package helper

import _ "net/http"
