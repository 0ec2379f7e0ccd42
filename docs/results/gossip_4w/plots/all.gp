set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/gossip_4w/accuracy_vs_epoch_all.png'
set title 'gossip_4w'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dpsgd_ring'
set output 'docs/results/gossip_4w/accuracy_vs_time_all.png'
set title 'gossip_4w'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dpsgd_ring'
set output 'docs/results/gossip_4w/accuracy_vs_bytes_all.png'
set title 'gossip_4w'
set xlabel 'MB sent per worker'
unset logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dpsgd_ring'
