package sweep

import (
	"context"

	"github.com/ackd/ackd/store"
)

// rowProgress is Job.Progress for a row claimed with token.
type rowProgress struct {
	st    store.Store
	id    int64
	token string
}

func (p rowProgress) Load(ctx context.Context) (string, error) { return p.st.Progress(ctx, p.id) }

func (p rowProgress) Save(ctx context.Context, progress string) (bool, error) {
	return p.st.SaveProgress(ctx, p.id, p.token, progress)
}
