package workflow

import _ "example.com/layout/helper"
