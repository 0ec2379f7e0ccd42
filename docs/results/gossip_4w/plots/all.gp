set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/gossip_4w/accuracy_vs_epoch_all.png'
set title 'gossip_4w'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/gossip_4w/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'dpsgd_ring', \
     'docs/results/gossip_4w/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'dpsgd_exp', \
     'docs/results/gossip_4w/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'choco_topk', \
     'docs/results/gossip_4w/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'dcd_qsgd', \
     'docs/results/gossip_4w/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'sgp'
set output 'docs/results/gossip_4w/accuracy_vs_time_all.png'
set title 'gossip_4w'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/gossip_4w/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'dpsgd_ring', \
     'docs/results/gossip_4w/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'dpsgd_exp', \
     'docs/results/gossip_4w/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'choco_topk', \
     'docs/results/gossip_4w/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'dcd_qsgd', \
     'docs/results/gossip_4w/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'sgp'
set output 'docs/results/gossip_4w/accuracy_vs_bytes_all.png'
set title 'gossip_4w'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/gossip_4w/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/gossip_4w/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'dpsgd_ring', \
     'docs/results/gossip_4w/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'dpsgd_exp', \
     'docs/results/gossip_4w/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'choco_topk', \
     'docs/results/gossip_4w/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'dcd_qsgd', \
     'docs/results/gossip_4w/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'sgp'
