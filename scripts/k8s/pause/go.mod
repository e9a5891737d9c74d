module pgfsbench.local/pause

go 1.22
